#!/usr/bin/env bash
# Where a proxied request's cycles go: lanyard's release build and nginx,
# each injecting the header in front of bench/run.sh's upstream, under
# wrk, one concurrency at a time. Run on demand, on a quiet machine; not
# part of `cargo test` or .ci/run.
#
#   bench/profile.sh [options]
#
#   --connections "L"   concurrencies (default "32 256")
#   --duration S        seconds per measurement (default 8)
#   --workers N         nginx proxy worker processes (default: as many as
#                       lanyard has proxy threads, one per CPU)
#   --no-build          use the binaries already in target/release
#   --keep              keep the work directory, with perf's data files
#
# For each concurrency, nginx and then lanyard: requests/s, the proxy's
# user and system CPU per request (from /proc), and its system calls and
# context switches per request (`perf stat`). Then lanyard once more under
# `perf record` (2,999 samples a second), its samples summed by where the
# code comes from: the kernel, hyper, tokio, the http crate, libc's
# allocator and memmove, lanyard's own modules. The release build strips
# its symbols, so the profile of lanyard's own code needs a build that
# keeps them: CARGO_PROFILE_RELEASE_STRIP=none (the table says "unknown"
# for what it cannot name).
#
# Needs perf (Debian's linux-perf, installed when missing) and the right
# to trace another process (root, or kernel.perf_event_paranoid at 1 or
# below). Everything listens on 127.0.0.1 only. Exit 1 on a failed run,
# 2 on bad options or a missing tool.
set -euo pipefail
prog=profile
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

connections="32 256"
duration=8
workers=
build=1
keep=0

die_usage() {
    echo "profile: $1" >&2
    echo "usage: bench/profile.sh [--connections \"L\"] [--duration S] [--workers N] [--no-build] [--keep]" >&2
    exit 2
}

while (($#)); do
    case $1 in
    --connections)
        [[ ${2-} =~ ^[0-9\ ]+$ ]] || die_usage "--connections needs whole numbers, got '${2-}'"
        connections=$2 && shift 2
        ;;
    --duration | --workers)
        number "$1" "${2-}"
        [[ $1 == --duration ]] && duration=$2 || workers=$2
        shift 2
        ;;
    --no-build) build=0 && shift ;;
    --keep) keep=1 && shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" && exit 0 ;;
    *) die_usage "unknown option $1" ;;
    esac
done
((duration > 0)) || die_usage "--duration must be above 0"
read -ra conc_list <<<"$connections"
((${#conc_list[@]})) || die_usage "--connections needs at least one concurrency"

unset SERVICE_API_URL DEMO_MOCK ORG_ID PROJECT_ID RULE_ID "${!SA_@}" "${!LANYARD_@}" "${!OTEL_@}"
install_missing wrk:wrk curl:curl perf:linux-perf python3:python3
[[ -n $(find_nginx) ]] || install_missing nginx:nginx
nginx_bin=$(find_nginx)
[[ -n $nginx_bin ]] || die_usage "nginx is still missing after the install"
release_binaries
workers=${workers:-$(nproc)}

work=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-profile.XXXXXX")
fatal_logs=(lanyard.log token.err nginx-upstream.error.log nginx-proxy.error.log)
pids=()
failed=0
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if ((keep || failed)); then
        echo "profile: work directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'failed=1; exit 1' INT TERM

mapfile -t ports < <(python3 bench/run_probe.py free-ports 2)
upstream_url=http://127.0.0.1:${ports[0]}
nginx_url=http://127.0.0.1:${ports[1]}
user_line=
((EUID != 0)) || user_line="user $(id -un) $(id -gn);"
render() { # template workers port [upstream port] [token]
    sed -e "s|@DIR@|$work|g" -e "s|@USER_LINE@|$user_line|" -e "s|@WORKERS@|$2|" \
        -e "s|@PORT@|$3|" -e "s|@UPSTREAM_PORT@|${4-}|" -e "s|@TOKEN@|${5-}|" \
        "bench/$1.conf.template" >"$work/$1.conf"
    mkdir -p "$work/$1-tmp"
    "$nginx_bin" -p "$work/" -c "$work/$1.conf" -e "$work/$1.error.log" &
    pids+=($!)
}

render nginx-upstream 1 "${ports[0]}"
wait_for_200 "$upstream_url/" || fatal "the upstream nginx did not answer"
"$mock_bin" "$work" --expires-in 3600 >"$work/token.out" 2>"$work/token.err" &
pids+=($!)
wait_for_line '^ready=1$' 60 "$work/token.out" || fatal "the mock token endpoint did not start"
SERVICE_API_URL=$upstream_url SA_CREDENTIALS_FILE=$work/credentials-a.json \
    LANYARD_LISTEN=127.0.0.1:0 LANYARD_ADMIN_LISTEN=127.0.0.1:0 \
    "$lanyard_bin" run >"$work/lanyard.log" 2>&1 &
lanyard_pid=$!
pids+=("$lanyard_pid")
wait_for_line '"lanyard started"' 30 "$work/lanyard.log" || fatal "lanyard did not start"
started=$(grep -m 1 '"lanyard started"' "$work/lanyard.log")
lanyard_url=http://$(grep -o '"proxy":"[^"]*"' <<<"$started" | cut -d '"' -f 4)
wait_for_200 "$lanyard_url/" || fatal "no answer through lanyard"
render nginx-proxy "$workers" "${ports[1]}" "${ports[0]}" bench-token
nginx_proxy_pid=${pids[-1]}
wait_for_200 "$nginx_url/" || fatal "no answer through the nginx proxy"
echo "profile: $(nproc) CPUs, $(uname -sr); nginx with $workers workers; load average $(cut -d ' ' -f 1-3 /proc/loadavg)"

# User and system CPU ticks of processes $@, as "user system".
cpu_split() {
    local pid user=0 system=0 stat fields
    for pid in "$@"; do
        stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
        read -ra fields <<<"${stat##*) }"
        user=$((user + fields[11]))
        system=$((system + fields[12]))
    done
    echo "$user $system"
}

ticks=$(getconf CLK_TCK)
table=$work/table.txt
# Measures target $1 (url $2, processes $3...) at $conns connections.
measure() {
    local name=$1 url=$2 before after requests
    shift 2
    local list
    list=$(
        IFS=,
        echo "$*"
    )
    wrk -t2 -c"$conns" -d2s "$url/" >/dev/null || fatal "wrk warm-up failed ($name)"
    before=$(cpu_split "$@")
    perf stat -x, -e context-switches,raw_syscalls:sys_enter -p "$list" -o "$work/stat-$name-$conns.csv" \
        -- wrk -t2 -c"$conns" -d"${duration}s" "$url/" >"$work/wrk-$name-$conns.txt" ||
        fatal "wrk or perf stat failed ($name, $conns connections)"
    after=$(cpu_split "$@")
    requests=$(awk '/requests in/ { print $1 }' "$work/wrk-$name-$conns.txt")
    awk -F, -v name="$name" -v c="$conns" -v n="$requests" -v d="$duration" -v t="$ticks" \
        -v b="$before" -v a="$after" '
        $3 == "context-switches" { cs = $1 } $3 == "raw_syscalls:sys_enter" { sc = $1 }
        END {
            split(b, x, " "); split(a, y, " ")
            printf "| %s | %s | %.0f | %.1f | %.1f | %.2f | %.2f |\n", name, c, n / d,
                (y[1] - x[1]) / t * 1e6 / n, (y[2] - x[2]) / t * 1e6 / n, sc / n, cs / n
        }' "$work/stat-$name-$conns.csv" >>"$table"
}

echo "| target | connections | req/s | user µs/req | system µs/req | system calls/req | context switches/req |" >"$table"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |" >>"$table"
for conns in "${conc_list[@]}"; do
    echo "profile: $conns connections"
    mapfile -t nginx_workers < <(pgrep -P "$nginx_proxy_pid")
    measure nginx "$nginx_url" "${nginx_workers[@]}"
    measure lanyard "$lanyard_url" "$lanyard_pid"
    perf record -q -F 2999 -p "$lanyard_pid" -o "$work/perf-$conns.data" \
        -- wrk -t2 -c"$conns" -d"${duration}s" "$lanyard_url/" >/dev/null 2>"$work/perf-$conns.err" ||
        fatal "perf record failed ($conns connections; see $work/perf-$conns.err)"
done

echo
cat "$table"
for conns in "${conc_list[@]}"; do
    echo
    echo "lanyard's samples at $conns connections, by where the code comes from:"
    perf report -i "$work/perf-$conns.data" --no-children --sort dso,sym -n --stdio 2>/dev/null |
        python3 bench/profile_sort.py
done
echo
echo "profile: load average at the end $(cut -d ' ' -f 1-3 /proc/loadavg)"
