#!/usr/bin/env bash
# Benchmark: lanyard side by side with nginx as a token-injecting proxy and
# with no proxy at all, on loopback, in one run, interleaved. Run
# on demand; not part of `cargo test` or .ci/run.
#
#   bench/run.sh [options]
#
#   --duration S            seconds per measurement (default 10)
#   --warmup S              seconds of discarded load before each
#                           measurement, 0 for none (default 2)
#   --rounds N              repeat the interleaved measurements N times;
#                           the tables show each cell's median (default 1)
#   --connections "L"       concurrencies of the GET runs (default "1 32 256")
#   --body-connections "L"  concurrencies of the 1 MiB POST runs
#                           (default "1 16"; "" skips them)
#   --startup-runs N        lanyard starts timed to /readyz (default 5)
#   --idle-connections N    keep-alive connections held open for the RSS
#                           measurement (default 1000)
#   --workers N             nginx proxy worker processes (default: as many
#                           as lanyard has runtime worker threads)
#   --upstream-workers N    worker processes of the upstream nginx (default 1)
#   --wrk-threads N         most wrk threads per run (default 2)
#   --quick                 a smoke test: --duration 2 --warmup 1 --rounds 1
#                           --startup-runs 3
#   --floor                 also measure examples/bare_proxy.rs, lanyard's
#                           accept loop, threads and pool with nothing per
#                           request but a fixed header: the floor under
#                           lanyard, and how far it sits from nginx; and
#                           examples/one_task_proxy.rs, one task per
#                           connection and no HTTP library: the floor of
#                           any proxy on tokio and these threads
#   --baseline PATH         also measure another lanyard release binary
#                           (say, one built from the commit before a
#                           change) as the target `baseline`, and report
#                           lanyard / baseline: a before/after in one run
#   --otel                  the lanyard under test traces: it exports every
#                           span by OTLP/HTTP to bench/otlp_sink.py, a
#                           receiver on loopback (the baseline does not).
#                           With --baseline set to the same binary, tracing
#                           on against off; without --otel, --baseline set
#                           to a build from before tracing measures what
#                           tracing off costs (nothing, it should read)
#   --no-build              use the binaries already in target/release
#   --keep                  keep the work directory (kept anyway on failure)
#
# Everything listens on and talks to 127.0.0.1 only. The pieces:
#   upstream  nginx answering `return 200 "ok"` (bench/nginx-upstream.conf.template)
#   direct    wrk straight to the upstream: no proxy at all
#   nginx     nginx in front of it adding a static `Authorization: Bearer`
#             with proxy_set_header, HTTP/1.1 and an upstream keep-alive
#             pool (bench/nginx-proxy.conf.template)
#   lanyard   the release `lanyard run`, SERVICE_API_URL = the upstream,
#             with a real token from the embedded mock
#             (examples/mock_service.rs, tokens of an hour)
#   bare      with --floor: examples/bare_proxy.rs, the same static header
#             as nginx, with as many threads
#   onetask   with --floor: examples/one_task_proxy.rs, likewise
#   baseline  with --baseline: that binary's `lanyard run`, set up as
#             lanyard is (same upstream, its own token from the same mock)
# For each concurrency and round, the targets are measured one after the
# other (the order rotates each round), so noise on this machine hits
# them all alike. wrk's Lua script (bench/run.lua) reports p50/p99 and the
# errors: socket errors and answers of 400 or above, which must be none.
#
# Also measured: lanyard's RSS idle (after start and one request) and with
# --idle-connections keep-alive connections open, on a fresh process; its
# start-up time to /readyz 200 less the token request's own duration (from
# its /metrics), on fresh processes; and POSTs of 1 MiB bodies through all
# targets, to a path where the upstream answers only once it holds the whole
# body; the nginx proxy streams bodies (proxy_request_buffering off), as
# lanyard does.
#
# Prints the tables, the ratios lanyard/nginx and lanyard/direct, lanyard's
# peak RSS (VmHWM), its token requests during the run, and which of the
# issue's targets this run met. With --baseline, also lanyard / baseline in
# req/s, CPU per request and p99: the ratio of the medians, and the lowest
# and highest of the rounds' own ratios (within a round the two run within
# a minute of each other), which show how far noise alone moves it.
# Exit 1 on any failed request, a token request count other than 1 (of
# either lanyard), a proxy that does not inject the header, a lanyard not
# exiting 0 on SIGTERM, or a baseline with other than lanyard's number of
# proxy threads; exit 2 on bad options or a missing tool. Missing targets
# do not fail the run: they are measurements.
set -euo pipefail
prog=bench
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
# --baseline's path is the caller's, before the cd.
caller_dir=$PWD
cd "$(dirname "$0")/.."

duration=10
warmup=2
rounds=1
connections="1 32 256"
body_connections="1 16"
startup_runs=5
idle_connections=1000
workers=
upstream_workers=1
wrk_threads=2
build=1
keep=0
floor=0
baseline_bin=
otel=0
body_bytes=$((1024 * 1024))

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

die_usage() {
    echo "bench: $1" >&2
    echo "usage: bench/run.sh [--duration S] [--rounds N] [--quick] ... (--help)" >&2
    exit 2
}

numbers() {
    [[ ${2-} =~ ^[0-9\ ]*$ ]] || die_usage "$1 needs whole numbers separated by spaces, got '${2-}'"
}

while (($#)); do
    case $1 in
    --duration | --warmup | --rounds | --startup-runs | --idle-connections | --workers | --upstream-workers | --wrk-threads)
        number "$1" "${2-}"
        case $1 in
        --duration) duration=$2 ;;
        --warmup) warmup=$2 ;;
        --rounds) rounds=$2 ;;
        --startup-runs) startup_runs=$2 ;;
        --idle-connections) idle_connections=$2 ;;
        --workers) workers=$2 ;;
        --upstream-workers) upstream_workers=$2 ;;
        --wrk-threads) wrk_threads=$2 ;;
        esac
        shift 2
        ;;
    --connections | --body-connections)
        numbers "$1" "${2-}"
        case $1 in
        --connections) connections=$2 ;;
        --body-connections) body_connections=$2 ;;
        esac
        shift 2
        ;;
    --quick)
        duration=2 warmup=1 rounds=1 startup_runs=3
        shift
        ;;
    --baseline)
        [[ -n ${2-} ]] || die_usage "--baseline needs the path of a lanyard binary"
        baseline_bin=$2
        [[ $baseline_bin == /* ]] || baseline_bin=$caller_dir/$baseline_bin
        [[ -x $baseline_bin && -f $baseline_bin ]] || die_usage "--baseline $2 is not an executable file"
        shift 2
        ;;
    --no-build) build=0 && shift ;;
    --otel) otel=1 && shift ;;
    --floor) floor=1 && shift ;;
    --keep) keep=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die_usage "unknown option $1" ;;
    esac
done
((duration > 0 && rounds > 0 && startup_runs > 0 && idle_connections > 0 && wrk_threads > 0)) ||
    die_usage "--duration, --rounds, --startup-runs, --idle-connections and --wrk-threads must be above 0"
((upstream_workers > 0)) || die_usage "--upstream-workers must be above 0"
[[ -z $workers ]] || ((workers > 0)) || die_usage "--workers must be above 0"
read -ra conc_list <<<"$connections"
read -ra body_conc_list <<<"$body_connections"
((${#conc_list[@]})) || die_usage "--connections needs at least one concurrency"
for c in "${conc_list[@]}" "${body_conc_list[@]}"; do
    ((c > 0)) || die_usage "a concurrency of 0"
done

# Settings of the caller's own sidecar would change what is measured.
unset SERVICE_API_URL DEMO_MOCK ORG_ID PROJECT_ID RULE_ID "${!SA_@}" "${!LANYARD_@}" "${!OTEL_@}"

missing=()
for tool in wrk:wrk curl:curl awk:gawk pgrep:procps python3:python3; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
[[ -n $(find_nginx) ]] || missing+=(nginx)
if ((${#missing[@]})); then
    echo "bench: installing ${missing[*]}"
    apt_install "${missing[@]}"
fi
nginx_bin=$(find_nginx)
[[ -n $nginx_bin ]] || die_usage "nginx is still missing after the install"

target=${CARGO_TARGET_DIR:-target}
lanyard_bin=$target/release/lanyard
token_bin=$target/release/examples/mock_service
bare_bin=$target/release/examples/bare_proxy
onetask_bin=$target/release/examples/one_task_proxy
bins=("$lanyard_bin" "$token_bin")
example_args=(--example mock_service)
if ((floor)); then
    bins+=("$bare_bin" "$onetask_bin")
    example_args+=(--example bare_proxy --example one_task_proxy)
fi
if ((build)); then
    # The binary as it ships, built alone: built with an example, it would
    # get the examples' test-support feature too (docs/tests.md).
    echo "bench: cargo build --release --bin lanyard, then ${example_args[*]}"
    cargo build --release --locked --quiet --bin lanyard
    cargo build --release --locked --quiet "${example_args[@]}"
fi
for bin in "${bins[@]}"; do
    [[ -x $bin ]] || die_usage "$bin is missing (drop --no-build)"
done

# The idle connections, plus wrk's, plus the descriptors of the processes
# started from here.
wanted_fds=$((idle_connections + 4096))
if (($(ulimit -Sn) < wanted_fds)); then
    hard=$(ulimit -Hn)
    if [[ $hard != unlimited ]] && ((hard < wanted_fds)); then
        wanted_fds=$hard
    fi
    ulimit -Sn "$wanted_fds"
fi

# --- processes and clean-up ----------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-bench.XXXXXX")
upstream_pid=
proxy_pid=
bare_pid=
onetask_pid=
lanyard_pid=
baseline_pid=
idle_lanyard_pid=
probe_pid=
mock_pid=
sink_pid=
failed=0
# Variables for the next start_lanyard only (--otel's).
lanyard_env=()

stop_pid() {
    if [[ -n ${1-} ]] && kill -0 "$1" 2>/dev/null; then
        kill -TERM "$1" 2>/dev/null || true
    fi
}

cleanup() {
    local pid
    for pid in "$probe_pid" "$idle_lanyard_pid" "$lanyard_pid" "$baseline_pid" "$proxy_pid" "$bare_pid" "$onetask_pid" "$upstream_pid" "$mock_pid" "$sink_pid"; do
        stop_pid "$pid"
    done
    wait 2>/dev/null || true
    if ((keep || failed)); then
        echo "bench: work directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'failed=1; exit 1' INT TERM

fatal_logs=(lanyard.log lanyard-idle.log baseline.log token.err nginx-upstream.error.log nginx-proxy.error.log)

render() {
    sed -e "s|@DIR@|$work|g" -e "s|@USER_LINE@|$user_line|" -e "s|@WORKERS@|$2|" \
        -e "s|@PORT@|$3|" -e "s|@UPSTREAM_PORT@|${4-}|" -e "s|@TOKEN@|${5-}|" \
        "bench/$1.conf.template" >"$work/$1.conf"
    mkdir -p "$work/$1-tmp"
    "$nginx_bin" -t -q -p "$work/" -c "$work/$1.conf" -e "$work/$1.error.log" ||
        fatal "nginx refused $work/$1.conf"
}

# Starts `lanyard run` of binary $2 (default: the one under test) in the
# background with its log in $work/$1.log; sets started_pid, started_proxy
# and started_admin.
start_lanyard() {
    env "${lanyard_env[@]}" SERVICE_API_URL="$upstream_url" SA_CREDENTIALS_FILE="$credentials" \
        LANYARD_LISTEN=127.0.0.1:0 LANYARD_ADMIN_LISTEN=127.0.0.1:0 \
        "${2:-$lanyard_bin}" run >"$work/$1.log" 2>&1 &
    started_pid=$!
    wait_for_line '"lanyard started"' 30 "$work/$1.log" || fatal "lanyard did not start ($1)"
    local line
    line=$(grep -m 1 '"lanyard started"' "$work/$1.log")
    started_proxy=http://$(grep -o '"proxy":"[^"]*"' <<<"$line" | cut -d '"' -f 4)
    started_admin=http://$(grep -o '"admin":"[^"]*"' <<<"$line" | cut -d '"' -f 4)
    wait_for_200 "$started_admin/readyz" || fatal "lanyard was not ready within 10 s ($1)"
}

# Stops lanyard $1 with SIGTERM; sets stopped_exit to its exit code.
stop_lanyard() {
    stopped_exit=0
    kill -TERM "$1"
    wait "$1" || stopped_exit=$?
}

# --- upstream, token endpoint, the reference numbers ----------------------
mapfile -t ports < <(python3 bench/run_probe.py free-ports 4)
upstream_port=${ports[0]}
proxy_port=${ports[1]}
bare_port=${ports[2]}
onetask_port=${ports[3]}
upstream_url=http://127.0.0.1:$upstream_port
proxy_url=http://127.0.0.1:$proxy_port
user_line=
if ((EUID == 0)); then
    # nginx started as root hands its workers to `nobody`, who cannot enter
    # the private work directory; keep them as the caller.
    user_line="user $(id -un) $(id -gn);"
fi

render nginx-upstream "$upstream_workers" "$upstream_port"
"$nginx_bin" -p "$work/" -c "$work/nginx-upstream.conf" -e "$work/nginx-upstream.error.log" &
upstream_pid=$!
wait_for_200 "$upstream_url/" || fatal "the upstream nginx did not answer"

credentials=$work/credentials-a.json
"$token_bin" "$work" --expires-in 3600 >"$work/token.out" 2>"$work/token.err" &
mock_pid=$!
wait_for_line '^ready=1$' 60 "$work/token.out" || fatal "the mock token endpoint did not start"

machine="$(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, $(uname -sr)"
echo "bench: $machine"
echo "bench: upstream nginx $upstream_url ($upstream_workers worker), work directory $work"

# Start-up to ready, on fresh processes.
echo "bench: timing $startup_runs lanyard start-ups to /readyz 200"
env SERVICE_API_URL="$upstream_url" SA_CREDENTIALS_FILE="$credentials" \
    LANYARD_LISTEN=127.0.0.1:0 LOG_DIR="$work" \
    python3 bench/run_probe.py ready "$lanyard_bin" "$startup_runs" >"$work/startup.txt" ||
    fatal "timing the start-up failed"
startup_net=$(awk '{ split($2, r, "="); split($3, t, "="); print r[2] - t[2] }' "$work/startup.txt" | median)
startup_min=$(awk '{ split($2, r, "="); split($3, t, "="); print r[2] - t[2] }' "$work/startup.txt" | sort -g | head -n 1)
startup_max=$(awk '{ split($2, r, "="); split($3, t, "="); print r[2] - t[2] }' "$work/startup.txt" | sort -g | tail -n 1)
startup_total=$(awk '{ split($2, r, "="); print r[2] }' "$work/startup.txt" | median)
startup_token=$(awk '{ split($3, t, "="); print t[2] }' "$work/startup.txt" | median)
startup_bad=$(awk '$4 != "tokens=1" || $5 != "exit=0"' "$work/startup.txt")
[[ -z $startup_bad ]] || fatal "a timed start-up went wrong: $startup_bad"

# RSS idle and with many idle keep-alive connections, on a fresh process.
echo "bench: lanyard RSS idle and with $idle_connections idle keep-alive connections"
start_lanyard lanyard-idle
idle_lanyard_pid=$started_pid
curl -fsS -o /dev/null "$started_proxy/" || fatal "the first request through lanyard failed"
sleep 0.5
rss_idle=$(status_kib "$idle_lanyard_pid" VmRSS)
python3 bench/run_probe.py idle "${started_proxy#http://}" "$idle_connections" "$work/idle.ready" \
    2>"$work/idle.err" &
probe_pid=$!
deadline=$(($(now_ms) + 60000))
until [[ -s $work/idle.ready ]]; do
    kill -0 "$probe_pid" 2>/dev/null || fatal "opening the idle connections failed: $(cat "$work/idle.err")"
    (($(now_ms) < deadline)) || fatal "opening the idle connections took over 60 s"
    sleep 0.1
done
sleep 0.5
rss_conns=$(status_kib "$idle_lanyard_pid" VmRSS)
curl -fsS "$started_admin/metrics" >"$work/metrics-idle.txt"
held_conns=$(metric lanyard_proxy_connections "$work/metrics-idle.txt")
held_conns=${held_conns%.*}
kill -TERM "$probe_pid"
wait "$probe_pid" || true
probe_pid=
stop_lanyard "$idle_lanyard_pid"
idle_exit=$stopped_exit
idle_lanyard_pid=

# --- the lanyard and nginx under test -------------------------------------
if ((otel)); then
    python3 bench/otlp_sink.py "$work/otlp.port" "$work/otlp.stats" &
    sink_pid=$!
    wait_for_line '^[0-9]+$' 10 "$work/otlp.port" || fatal "the OTLP sink did not start"
    # Batches every second, the queue and batch sizes the defaults.
    lanyard_env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$(cat "$work/otlp.port")"
        OTEL_SERVICE_NAME=lanyard-bench OTEL_BSP_SCHEDULE_DELAY=1000)
fi
start_lanyard lanyard
lanyard_env=()
lanyard_pid=$started_pid
lanyard_url=$started_proxy
lanyard_admin=$started_admin

# lanyard serves the proxy on LANYARD_WORKER_THREADS threads (one per CPU
# up to 4 by default); its start-up line names the count and is believed
# first.
workers_from="--workers"
if [[ -z $workers ]]; then
    workers=$(grep -m 1 -o '"worker_threads":[0-9]*' "$work/lanyard.log" | cut -d : -f 2 || true)
    workers_from="lanyard's start-up log"
fi
if [[ -z $workers ]]; then
    if [[ -n ${TOKIO_WORKER_THREADS:-} ]]; then
        workers=$TOKIO_WORKER_THREADS
        workers_from="TOKIO_WORKER_THREADS"
    else
        workers=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
        workers_from="tokio's default: one per CPU"
    fi
fi
# The proxy threads are named lanyard-proxy-N (truncated to 15 characters
# in comm); a cross-check of the count above.
proxy_threads() {
    awk '/^lanyard-proxy/ { n++ } END { print n + 0 }' /proc/"$1"/task/*/comm
}
runtime_threads=$(proxy_threads "$lanyard_pid")
all_threads=$(find "/proc/$lanyard_pid/task" -mindepth 1 -maxdepth 1 | wc -l)

token_value="mock-$(tr -d '-' </proc/sys/kernel/random/uuid)"
render nginx-proxy "$workers" "$proxy_port" "$upstream_port" "$token_value"
"$nginx_bin" -p "$work/" -c "$work/nginx-proxy.conf" -e "$work/nginx-proxy.error.log" &
proxy_pid=$!
wait_for_200 "$proxy_url/" || fatal "the nginx proxy did not answer"
echo "bench: nginx proxy $proxy_url with $workers worker processes ($workers_from;" \
    "lanyard has $runtime_threads proxy threads of $all_threads)"
echo "bench: lanyard $lanyard_url (pid $lanyard_pid)$( ((otel)) && echo ", tracing to the OTLP sink")"

# Both proxies must send a bearer token; lanyard's must be the mock's.
nginx_auth=$(curl -fsS "$proxy_url/bench-authorization") || fatal "no answer through nginx"
lanyard_auth=$(curl -fsS "$lanyard_url/bench-authorization") || fatal "no answer through lanyard"
[[ $nginx_auth == "Bearer $token_value" ]] || fatal "nginx sent '$nginx_auth'"
[[ $lanyard_auth == "Bearer mock-"* ]] || fatal "lanyard sent no mock token"
rss_ready=$(status_kib "$lanyard_pid" VmRSS)

declare -A url=([direct]=$upstream_url [nginx]=$proxy_url [lanyard]=$lanyard_url)
targets=(direct nginx lanyard)

# Starts floor proxy $1 (target name) from binary $2 on port $3, sending to
# upstream $4, checks that it injects the header, and sets started_pid.
start_floor() {
    local name=$1 bin=$2 port=$3 upstream=$4 auth
    "$bin" "127.0.0.1:$port" "$upstream" "Bearer $token_value" "$workers" \
        >"$work/$name.out" 2>"$work/$name.err" &
    started_pid=$!
    wait_for_line '^listening=' 30 "$work/$name.out" || fatal "${bin##*/} did not start"
    url[$name]=http://127.0.0.1:$port
    auth=$(curl -fsS "${url[$name]}/bench-authorization") || fatal "no answer through ${bin##*/}"
    [[ $auth == "Bearer $token_value" ]] || fatal "${bin##*/} sent '$auth'"
    echo "bench: ${bin##*/} ${url[$name]} (pid $started_pid, $workers threads)"
    targets+=("$name")
}
if ((floor)); then
    start_floor bare "$bare_bin" "$bare_port" "$upstream_url"
    bare_pid=$started_pid
    # one_task_proxy takes the upstream's address, not its URL.
    start_floor onetask "$onetask_bin" "$onetask_port" "127.0.0.1:$upstream_port"
    onetask_pid=$started_pid
fi

# The baseline is set up as lanyard is, and must run as many proxy threads
# for the two to be compared.
if [[ -n $baseline_bin ]]; then
    start_lanyard baseline "$baseline_bin"
    baseline_pid=$started_pid
    url[baseline]=$started_proxy
    baseline_admin=$started_admin
    baseline_threads=$(proxy_threads "$baseline_pid")
    ((baseline_threads == runtime_threads)) ||
        fatal "the baseline has $baseline_threads proxy threads, lanyard $runtime_threads"
    baseline_auth=$(curl -fsS "${url[baseline]}/bench-authorization") || fatal "no answer through the baseline"
    [[ $baseline_auth == "Bearer mock-"* ]] || fatal "the baseline sent no mock token"
    baseline_rss_ready=$(status_kib "$baseline_pid" VmRSS)
    echo "bench: baseline ${url[baseline]} (pid $baseline_pid, $baseline_threads proxy threads): $baseline_bin"
    targets+=(baseline)
fi

# The body runs' path must take a whole 1 MiB body through every target.
head -c "$body_bytes" /dev/zero >"$work/body.bin"
for name in "${targets[@]}"; do
    answer=$(curl -fsS --data-binary "@$work/body.bin" "${url[$name]}/body") ||
        fatal "a 1 MiB POST through $name failed"
    [[ $answer == ok ]] || fatal "a 1 MiB POST through $name was answered '$answer'"
done
rm "$work/body.bin"

# The processes whose CPU time a target's proxy costs.
proxy_pids() {
    case $1 in
    nginx) pgrep -P "$proxy_pid" || true ;;
    lanyard) echo "$lanyard_pid" ;;
    bare) echo "$bare_pid" ;;
    onetask) echo "$onetask_pid" ;;
    baseline) echo "$baseline_pid" ;;
    esac
}

results=$work/results.tsv
printf 'kind\tconnections\tround\ttarget\trequests\tduration_us\tbytes\tp50_us\tp99_us\tmax_us\terrors\tproxy_cpu_ticks\n' >"$results"

# Measures kind $1 (get|body) at $2 connections in round $3 against target
# $4, after a warm-up, and appends a line to $results.
measure() {
    local kind=$1 conns=$2 round=$3 name=$4 body=0 path=/ threads=$wrk_threads out line cpu_before cpu_after
    if [[ $kind == body ]]; then
        body=$body_bytes
        path=/body
    fi
    ((threads <= conns)) || threads=$conns
    local wrk_cmd=(wrk --threads "$threads" --connections "$conns" --timeout 10s --script bench/run.lua)
    if ((warmup > 0)); then
        BENCH_BODY_BYTES=$body "${wrk_cmd[@]}" --duration "${warmup}s" "${url[$name]}$path" >/dev/null 2>&1 ||
            fatal "wrk warm-up failed: $name, $conns connections"
    fi
    local pids
    mapfile -t pids < <(proxy_pids "$name")
    cpu_before=$(cpu_ticks "${pids[@]}")
    out=$work/wrk-$kind-$conns-$round-$name.txt
    BENCH_BODY_BYTES=$body "${wrk_cmd[@]}" --duration "${duration}s" "${url[$name]}$path" >"$out" 2>&1 ||
        fatal "wrk failed: $name, $conns connections (see $out)"
    cpu_after=$(cpu_ticks "${pids[@]}")
    line=$(grep -m 1 '^BENCH ' "$out") || fatal "wrk printed no summary (see $out)"
    awk -v kind="$kind" -v c="$conns" -v r="$round" -v t="$name" -v cpu=$((cpu_after - cpu_before)) '{
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        errors = v["connect"] + v["read"] + v["write"] + v["timeout"] + v["status"]
        printf "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", kind, c, r, t, v["requests"],
            v["duration_us"], v["bytes"], v["p50_us"], v["p99_us"], v["max_us"], errors, cpu
    }' <<<"$line" >>"$results"
    awk -F'\t' 'END { printf "bench:   %-5s %4s conns round %s %-8s %9.0f req/s  p50 %.3f ms  p99 %.3f ms  errors %d\n",
        $1, $2, $3, $4, $5 / ($6 / 1e6), $8 / 1000, $9 / 1000, $11 }' "$results"
}

# Each concurrency, each round, the three targets back to back; the order
# rotates from round to round so no target always runs first or last.
run_matrix() {
    local kind=$1 conns round i
    shift
    for conns in "$@"; do
        for ((round = 1; round <= rounds; round++)); do
            for ((i = 0; i < ${#targets[@]}; i++)); do
                measure "$kind" "$conns" "$round" "${targets[(i + round - 1) % ${#targets[@]}]}"
            done
        done
    done
}

cells=$((${#conc_list[@]} * ${#targets[@]} * rounds))
echo "bench: GET, ${duration} s per run after ${warmup} s of warm-up: $cells runs," \
    "about $((cells * (duration + warmup))) s"
run_matrix get "${conc_list[@]}"
hwm_get=$(status_kib "$lanyard_pid" VmHWM)

if ((${#body_conc_list[@]})); then
    cells=$((${#body_conc_list[@]} * ${#targets[@]} * rounds))
    echo "bench: POST with 1 MiB bodies: $cells runs, about $((cells * (duration + warmup))) s"
    run_matrix body "${body_conc_list[@]}"
fi
hwm_all=$(status_kib "$lanyard_pid" VmHWM)
rss_end=$(status_kib "$lanyard_pid" VmRSS)

sleep 0.5 # let the last answers be counted
curl -fsS "$lanyard_admin/metrics" >"$work/metrics.txt" || fatal "cannot scrape lanyard's /metrics"
stop_lanyard "$lanyard_pid"
lanyard_exit=$stopped_exit
lanyard_pid=
m=$work/metrics.txt
token_success=$(metric lanyard_token_requests_total "$m" 'outcome="success"')
token_success=${token_success%.*}
token_total=$(metric lanyard_token_requests_total "$m")
token_total=${token_total%.*}
lanyard_answers=$(metric lanyard_proxy_requests_total "$m")
lanyard_non_2xx=$(metric lanyard_proxy_requests_total "$m" 'code="[^2]')
upstream_errors=$(metric lanyard_upstream_errors_total "$m")
spans_dropped=$(metric lanyard_otel_spans_dropped_total "$m")
if ((otel)); then
    kill -TERM "$sink_pid" 2>/dev/null || true
    wait "$sink_pid" 2>/dev/null || true
    sink_pid=
    otlp_stats=$(cat "$work/otlp.stats" 2>/dev/null || echo "no stats")
fi
if [[ -n $baseline_bin ]]; then
    hwm_baseline=$(status_kib "$baseline_pid" VmHWM)
    curl -fsS "$baseline_admin/metrics" >"$work/metrics-baseline.txt" || fatal "cannot scrape the baseline's /metrics"
    stop_lanyard "$baseline_pid"
    baseline_exit=$stopped_exit
    baseline_pid=
    m=$work/metrics-baseline.txt
    baseline_token_success=$(metric lanyard_token_requests_total "$m" 'outcome="success"')
    baseline_token_success=${baseline_token_success%.*}
    baseline_token_total=$(metric lanyard_token_requests_total "$m")
    baseline_token_total=${baseline_token_total%.*}
    baseline_answers=$(metric lanyard_proxy_requests_total "$m")
    baseline_non_2xx=$(metric lanyard_proxy_requests_total "$m" 'code="[^2]')
fi
# On SIGTERM the mock prints its counters and exits.
kill -TERM "$mock_pid" 2>/dev/null || true
wait "$mock_pid" 2>/dev/null || true
mock_pid=
mock_issued=$(sed -n 's/^stats_tokens_issued=//p' "$work/token.out")

# --- report ----------------------------------------------------------------
hz=$(getconf CLK_TCK)
cell() { # kind connections target column [round] -> the median over rounds, or the round's
    awk -F'\t' -v k="$1" -v c="$2" -v t="$3" -v col="$4" -v r="${5-}" -v hz="$hz" -v body="$body_bytes" '
        $1 == k && $2 == c && $4 == t && (r == "" || $3 == r) {
            if (col == "rps") print $5 / ($6 / 1e6)
            else if (col == "mibs") print $5 * body / 1048576 / ($6 / 1e6)
            else if (col == "p50") print $8 / 1000
            else if (col == "p99") print $9 / 1000
            else if (col == "cpu") print ($5 ? $12 / hz * 1e6 / $5 : 0)
        }' "$results" | median
}
errors_of() {
    awk -F'\t' -v k="$1" -v c="$2" -v t="$3" '$1 == k && $2 == c && $4 == t { n += $11 } END { print n + 0 }' "$results"
}
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'
}
# The lowest and highest over the rounds of the round's own ratio $3/$4 in
# column $5, for kind $1 at $2 connections: "low-high".
round_ratios() {
    local round
    for ((round = 1; round <= rounds; round++)); do
        ratio "$(cell "$1" "$2" "$3" "$5" "$round")" "$(cell "$1" "$2" "$4" "$5" "$round")"
        echo
    done | sort -g | awk 'NR == 1 { low = $1 } { high = $1 } END { printf "%s-%s", low, high }'
}
rule() { printf '%.0s-' {1..78} && echo; }

total_errors=0
print_table() {
    local kind=$1 conns name cpu errors
    shift
    if [[ $kind == get ]]; then
        printf '%-11s  %-8s %10s %10s %10s %14s %7s\n' connections target req/s "p50 ms" "p99 ms" "CPU us/req" errors
    else
        printf '%-11s  %-8s %10s %10s %10s %10s %7s\n' connections target req/s MiB/s "p50 ms" "p99 ms" errors
    fi
    for conns in "$@"; do
        for name in "${targets[@]}"; do
            errors=$(errors_of "$kind" "$conns" "$name")
            total_errors=$((total_errors + errors))
            if [[ $kind == get ]]; then
                cpu=-
                [[ $name == direct ]] || cpu=$(printf '%.1f' "$(cell get "$conns" "$name" cpu)")
                printf '%-11s  %-8s %10.0f %10.3f %10.3f %14s %7d\n' "$conns" "$name" \
                    "$(cell get "$conns" "$name" rps)" "$(cell get "$conns" "$name" p50)" \
                    "$(cell get "$conns" "$name" p99)" "$cpu" "$errors"
            else
                printf '%-11s  %-8s %10.0f %10.0f %10.3f %10.3f %7d\n' "$conns" "$name" \
                    "$(cell body "$conns" "$name" rps)" "$(cell body "$conns" "$name" mibs)" \
                    "$(cell body "$conns" "$name" p50)" "$(cell body "$conns" "$name" p99)" "$errors"
            fi
        done
    done
}
# For kind $1: $2/$3 and $4/$5 in req/s and in p99, at each concurrency
# after them.
print_ratios() {
    local kind=$1 a1=$2 b1=$3 a2=$4 b2=$5 conns
    shift 5
    printf '%-11s  %19s %19s %19s %19s\n' connections "req/s $a1/$b1" "p99 $a1/$b1" "req/s $a2/$b2" "p99 $a2/$b2"
    for conns in "$@"; do
        printf '%-11s  %19s %19s %19s %19s\n' "$conns" \
            "$(ratio "$(cell "$kind" "$conns" "$a1" rps)" "$(cell "$kind" "$conns" "$b1" rps)")" \
            "$(ratio "$(cell "$kind" "$conns" "$a1" p99)" "$(cell "$kind" "$conns" "$b1" p99)")" \
            "$(ratio "$(cell "$kind" "$conns" "$a2" rps)" "$(cell "$kind" "$conns" "$b2" rps)")" \
            "$(ratio "$(cell "$kind" "$conns" "$a2" p99)" "$(cell "$kind" "$conns" "$b2" p99)")"
    done
}

# For kind $1: lanyard/baseline in req/s, CPU per request and p99 at each
# concurrency after it, with the rounds' range when there are rounds.
print_baseline_ratios() {
    local kind=$1 conns col cell_text cells
    shift
    printf '%-11s  %21s %21s %21s\n' connections req/s "CPU us/req" "p99"
    for conns in "$@"; do
        cells=()
        for col in rps cpu p99; do
            cell_text=$(ratio "$(cell "$kind" "$conns" lanyard "$col")" "$(cell "$kind" "$conns" baseline "$col")")
            ((rounds == 1)) || cell_text+=" ($(round_ratios "$kind" "$conns" lanyard baseline "$col"))"
            cells+=("$cell_text")
        done
        printf '%-11s  %21s %21s %21s\n' "$conns" "${cells[@]}"
    done
}
baseline_heading() {
    local range=
    ((rounds == 1)) || range=$'\n(in brackets: the lowest and highest of the rounds\' own ratios)'
    echo "lanyard / baseline, after / before (req/s above 1 is faster; CPU and p99 below 1 are better)$range"
}

rounds_note="one round"
((rounds == 1)) || rounds_note="median of $rounds rounds"
echo
versions="lanyard $("$lanyard_bin" --version | awk '{ print $NF }'), nginx $("$nginx_bin" -v 2>&1 | sed 's|.*/||')"
versions+=", wrk $(wrk --version 2>&1 | awk 'NR == 1 { print $2 }' || true)"
[[ -z $baseline_bin ]] || versions+=", baseline lanyard $("$baseline_bin" --version | awk '{ print $NF }')"
echo "lanyard benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $versions"
echo "machine: $machine"
echo "nginx proxy: $workers worker processes; lanyard: $workers proxy threads ($workers_from);" \
    "upstream nginx: $upstream_workers worker; wrk: up to $wrk_threads threads"
rule
echo "GET / (upstream answers 200 \"ok\"), ${duration} s per run, $rounds_note"
print_table get "${conc_list[@]}"
echo "(CPU us/req: user + system CPU time of the proxy per request; for nginx, its workers')"
echo
echo "lanyard / nginx and lanyard / direct (req/s above 1 is faster; p99 below 1 is better)"
print_ratios get lanyard nginx lanyard direct "${conc_list[@]}"
if ((floor)); then
    echo
    echo "the floor: bare_proxy / nginx, and lanyard / bare_proxy"
    print_ratios get bare nginx lanyard bare "${conc_list[@]}"
    echo
    echo "one task per connection, no HTTP library: one_task_proxy / nginx, and lanyard / one_task_proxy"
    print_ratios get onetask nginx lanyard onetask "${conc_list[@]}"
fi
if [[ -n $baseline_bin ]]; then
    echo
    echo "baseline: $baseline_bin"
    baseline_heading
    print_baseline_ratios get "${conc_list[@]}"
fi
if ((${#body_conc_list[@]})); then
    rule
    echo "POST /body with a 1 MiB body (the upstream answers once it has it all), ${duration} s per run, $rounds_note"
    print_table body "${body_conc_list[@]}"
    echo
    print_ratios body lanyard nginx lanyard direct "${body_conc_list[@]}"
    if [[ -n $baseline_bin ]]; then
        echo
        baseline_heading
        print_baseline_ratios body "${body_conc_list[@]}"
    fi
fi
rule
row() { printf '%-46s %s\n' "$1" "$2"; }
row "lanyard RSS idle (after start, one request)" "$(mib "$rss_idle")"
row "lanyard RSS, $idle_connections idle keep-alive connections" "$(mib "$rss_conns") (lanyard counted $held_conns open)"
row "lanyard RSS before the load" "$(mib "$rss_ready")"
row "lanyard peak RSS (VmHWM), GET runs" "$(mib "$hwm_get")"
row "lanyard peak RSS (VmHWM), whole run" "$(mib "$hwm_all") (RSS at the end $(mib "$rss_end"))"
row "start-up to /readyz 200, less token request" "$(printf '%.1f ms median (min %.1f, max %.1f) of %d' \
    "$startup_net" "$startup_min" "$startup_max" "$startup_runs")"
row "  total / the token request" "$(printf '%.1f ms / %.1f ms (medians; the token request as lanyard times it, signing included)' "$startup_total" "$startup_token")"
row "lanyard token requests during the run" "$token_total ($token_success success)"
row "  tokens the mock issued in all" "$mock_issued (the run's, plus one per timed start-up and the RSS process)"
row "lanyard answers / non-2xx / upstream errors" "${lanyard_answers%.*} / ${lanyard_non_2xx%.*} / ${upstream_errors%.*}"
row "failed requests seen by wrk (all targets)" "$total_errors"
row "lanyard exit on SIGTERM (run / RSS process)" "$lanyard_exit / $idle_exit"
if ((otel)); then
    row "spans: the sink received / lanyard dropped" "$otlp_stats / ${spans_dropped%.*}"
fi
if [[ -n $baseline_bin ]]; then
    row "baseline RSS before the load / peak (VmHWM)" "$(mib "$baseline_rss_ready") / $(mib "$hwm_baseline")"
    row "baseline token requests during the run" "$baseline_token_total ($baseline_token_success success)"
    row "baseline answers / non-2xx" "${baseline_answers%.*} / ${baseline_non_2xx%.*}"
    row "baseline exit on SIGTERM" "$baseline_exit"
fi
rule

# The issue's targets, as measurements: a miss is reported, not fatal.
target_line() {
    local verdict="not met"
    (($2)) && verdict=met
    printf '  %-58s %s\n' "$1" "$verdict"
}
echo "targets in this run:"
for conns in 32 256; do
    [[ " ${conc_list[*]} " == *" $conns "* ]] || continue
    rps_ratio=$(ratio "$(cell get "$conns" lanyard rps)" "$(cell get "$conns" nginx rps)")
    p99_ratio=$(ratio "$(cell get "$conns" lanyard p99)" "$(cell get "$conns" nginx p99)")
    target_line "req/s at least nginx's at $conns connections ($rps_ratio x)" \
        "$(awk -v r="$rps_ratio" 'BEGIN { print (r != "n/a" && r + 0 >= 1) }')"
    target_line "p99 no worse than nginx's at $conns connections ($p99_ratio x)" \
        "$(awk -v r="$p99_ratio" 'BEGIN { print (r != "n/a" && r + 0 <= 1) }')"
done
target_line "idle RSS under 10 MiB ($(mib "$rss_idle"))" "rss_idle < 10240"
if ((idle_connections == 1000)); then
    target_line "RSS under 40 MiB at 1,000 connections ($(mib "$rss_conns"))" "rss_conns < 40960"
fi
target_line "start-up under 100 ms plus the token round trip ($(printf '%.1f' "$startup_net") ms)" \
    "$(awk -v s="$startup_net" 'BEGIN { print (s < 100) }')"

# --- verdict ---------------------------------------------------------------
problems=()
((total_errors == 0)) || problems+=("$total_errors failed requests")
((token_total == 1 && token_success == 1)) || problems+=("lanyard made $token_total token requests ($token_success success), not 1")
((lanyard_exit == 0)) || problems+=("lanyard exited $lanyard_exit on SIGTERM")
((idle_exit == 0)) || problems+=("the RSS lanyard exited $idle_exit on SIGTERM")
if [[ -n $baseline_bin ]]; then
    ((baseline_token_total == 1 && baseline_token_success == 1)) ||
        problems+=("the baseline made $baseline_token_total token requests ($baseline_token_success success), not 1")
    ((baseline_exit == 0)) || problems+=("the baseline exited $baseline_exit on SIGTERM")
fi
((held_conns >= idle_connections)) || problems+=("lanyard held $held_conns of $idle_connections idle connections")
if ((${#problems[@]})); then
    failed=1
    printf 'bench: FAILED: %s\n' "${problems[@]}"
    exit 1
fi
((keep)) && echo "bench: raw results in $results"
echo "bench: passed"
