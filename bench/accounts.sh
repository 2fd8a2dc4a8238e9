#!/usr/bin/env bash
# Many accounts (docs/accounts.md): what a sidecar of a directory of N
# credentials files costs against the one-account sidecar, both measured
# in one run. Run on demand; not part of `cargo test` or .ci/run.
#
#   bench/accounts.sh [options]
#
#   --accounts N        files in the directory, one organization each
#                       (default 1000)
#   --rounds N          wrk rounds, the two sidecars interleaved; the table
#                       shows each cell's median (default 3)
#   --duration S        seconds per wrk run (default 10)
#   --warmup S          seconds of discarded load before each wrk run, 0
#                       for none (default 2)
#   --connections "L"   wrk's concurrencies (default "1 32 256")
#   --startup-runs N    starts of each sidecar timed to /readyz 200,
#                       alternating (default 5)
#   --window S          seconds after start in which the token requests
#                       are counted (default 60)
#   --orgs-used N       organizations the window's traffic calls (default 4)
#   --touch-concurrency N
#                       requests at once when every organization is called
#                       once (default 16)
#   --quick             a smoke run: --duration 2 --warmup 1 --rounds 1
#                       --connections 32 --startup-runs 3 --window 10
#   --no-build          use the binaries already in target/release (or
#                       $CARGO_TARGET_DIR/release)
#   --binary PATH       measure this lanyard binary instead, with the mock
#                       beside it (PATH's directory/examples/mock_service),
#                       building nothing: say, target/debug/lanyard to try
#                       the script itself; a debug build's figures are not
#                       a release build's, and the report says which it ran.
#                       A debug build takes seconds to start: with --quick,
#                       give it --window 45 (its paced traffic starts once
#                       both sidecars are ready)
#   --baseline PATH     also measure, on the request path only, another
#                       lanyard release binary (say, one built from the
#                       commit before a change) as a third sidecar of the
#                       same directory, interleaved with the two, and report
#                       directory / baseline: a before/after in one run
#   --keep              keep the work directory (kept anyway on failure)
#
# Everything listens on and talks to 127.0.0.1 only. The pieces:
#   upstream   nginx answering `return 200 "ok"` (bench/nginx-upstream.conf.template,
#              its /bench-authorization moved under org-0001, below)
#   mock       examples/mock_service.rs --accounts N --expires-in 3600: the
#              token endpoint; writes credentials-a.json and the directory
#              accounts/org-0001.json ... (organizations org-0001 ...)
#   single     `lanyard run` with SA_CREDENTIALS_FILE=credentials-a.json
#   directory  `lanyard run` with SA_CREDENTIALS_DIR=accounts/ and no
#              SA_CREDENTIALS_FILE
# Both sidecars forward to the upstream (SERVICE_API_URL), and both are the
# same release binary with the same defaults (proxy threads included).
#
# Measured, in this order:
#   1. start-up to /readyz 200 of fresh processes, the two alternating
#      (bench/run_probe.py ready): the single sidecar's includes its token
#      request, whose own duration its /metrics gives; the directory's asks
#      for no token at start-up, but reads and checks every file;
#   2. the two started afresh at the same moment: RSS (VmRSS) once both
#      answer /readyz 200, before any request;
#   3. the token requests the mock saw in the first --window seconds after
#      that start, by client id, while traffic runs through both sidecars
#      to --orgs-used organizations (org-0001 ...), each called every
#      100 ms: expected, one per organization used and none for the others
#      from the directory, one from the single sidecar;
#   4. every organization called once through the directory sidecar,
#      --touch-concurrency at a time (each first request waits for its
#      account's token), and the same N paths through the single sidecar;
#      then RSS again: the directory's now holds N tokens. Memory per
#      account, once called: the directory's RSS at ready less the single
#      sidecar's, over N (a file at start), plus the directory's growth
#      over the N calls, over N (once called): docs/accounts.md's
#      per-account term;
#   5. wrk (bench/run.lua) on GET /organizations/org-0001/x through each,
#      for every concurrency and round one after the other, the order
#      rotating per round: req/s, p50, p99, and CPU per request (user plus
#      system time of the sidecar from /proc/PID/stat, over the requests).
#
# Exit 1 on any failed request, on a token request count other than the
# expected ones (the window's, one per account over the whole run, none
# from the directory's timed starts), on fewer than N accounts holding a
# token after step 4 (/readyz's accounts report), or on a sidecar not
# exiting 0 on SIGTERM; exit 2 on bad options or a missing tool.
set -euo pipefail
prog=accounts
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
# --baseline's path is the caller's, before the cd.
caller_dir=$PWD
cd "$(dirname "$0")/.."

accounts=1000
rounds=3
duration=10
warmup=2
connections="1 32 256"
startup_runs=5
window=60
orgs_used=4
touch_concurrency=16
build=1
keep=0
baseline_bin=
given_bin=
# The mock's tokens outlive the run, so every token request counted is a
# first one, never a renewal.
expires_in=3600

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

die_usage() {
    echo "accounts: $1" >&2
    echo "usage: bench/accounts.sh [--accounts N] [--rounds N] [--duration S] [--quick] ... (--help)" >&2
    exit 2
}

while (($#)); do
    case $1 in
    --accounts | --rounds | --duration | --warmup | --startup-runs | --window | --orgs-used | --touch-concurrency)
        number "$1" "${2-}"
        case $1 in
        --accounts) accounts=$2 ;;
        --rounds) rounds=$2 ;;
        --duration) duration=$2 ;;
        --warmup) warmup=$2 ;;
        --startup-runs) startup_runs=$2 ;;
        --window) window=$2 ;;
        --orgs-used) orgs_used=$2 ;;
        --touch-concurrency) touch_concurrency=$2 ;;
        esac
        shift 2
        ;;
    --connections)
        [[ ${2-} =~ ^[0-9\ ]*$ ]] || die_usage "--connections needs whole numbers separated by spaces, got '${2-}'"
        connections=$2
        shift 2
        ;;
    --quick)
        duration=2 warmup=1 rounds=1 connections=32 startup_runs=3 window=10
        shift
        ;;
    --no-build) build=0 && shift ;;
    --binary)
        [[ -n ${2-} ]] || die_usage "--binary needs the path of a lanyard binary"
        given_bin=$2
        [[ $given_bin == /* ]] || given_bin=$caller_dir/$given_bin
        [[ -x $given_bin && -f $given_bin ]] || die_usage "--binary $2 is not an executable file"
        shift 2
        ;;
    --keep) keep=1 && shift ;;
    --baseline)
        [[ -n ${2-} ]] || die_usage "--baseline needs the path of a lanyard binary"
        baseline_bin=$2
        [[ $baseline_bin == /* ]] || baseline_bin=$caller_dir/$baseline_bin
        [[ -x $baseline_bin && -f $baseline_bin ]] || die_usage "--baseline $2 is not an executable file"
        shift 2
        ;;
    -h | --help) usage && exit 0 ;;
    *) die_usage "unknown option $1" ;;
    esac
done
((accounts > 0 && rounds > 0 && duration > 0 && startup_runs > 0 && window > 0 && touch_concurrency > 0)) ||
    die_usage "--accounts, --rounds, --duration, --startup-runs, --window and --touch-concurrency must be above 0"
((orgs_used > 0 && orgs_used <= accounts)) || die_usage "--orgs-used must be between 1 and --accounts"
read -ra conc_list <<<"$connections"
((${#conc_list[@]})) || die_usage "--connections needs at least one concurrency"
for c in "${conc_list[@]}"; do
    ((c > 0)) || die_usage "a concurrency of 0"
done

# Settings of the caller's own sidecar would change what is measured.
unset SERVICE_API_URL DEMO_MOCK ORG_ID PROJECT_ID RULE_ID "${!SA_@}" "${!LANYARD_@}" "${!OTEL_@}"

install_missing wrk:wrk curl:curl awk:gawk python3:python3
[[ -n $(find_nginx) ]] || install_missing nginx:nginx
nginx_bin=$(find_nginx)
[[ -n $nginx_bin ]] || die_usage "nginx is still missing after the install"
if [[ -n $given_bin ]]; then
    lanyard_bin=$given_bin
    mock_bin=$(dirname "$given_bin")/examples/mock_service
    [[ -x $mock_bin ]] || die_usage "$mock_bin is missing: build the mock_service example beside --binary"
else
    release_binaries
fi

# wrk's connections, the sidecars' to the upstream, and the directory's
# files while it reads them.
if (($(ulimit -Sn) < 4096)); then
    ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true
fi

# --- processes and clean-up ----------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-accounts.XXXXXX")
upstream_pid=
mock_pid=
single_pid=
directory_pid=
baseline_pid=
traffic_pid=
failed=0

cleanup() {
    local pid
    for pid in "$traffic_pid" "$single_pid" "$directory_pid" "$baseline_pid" "$upstream_pid" "$mock_pid"; do
        if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    wait 2>/dev/null || true
    if ((keep || failed)); then
        echo "accounts: work directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'failed=1; exit 1' INT TERM

fatal_logs=(single.log directory.log baseline.log mock.err nginx-upstream.error.log)

# The environment of sidecar $1 (single|directory|baseline, the last a
# directory sidecar too), one NAME=VALUE a line.
sidecar_env() {
    printf '%s\n' SERVICE_API_URL="$upstream_url" LANYARD_LISTEN=127.0.0.1:0
    if [[ $1 == single ]]; then
        printf '%s\n' SA_CREDENTIALS_FILE="$credentials"
    else
        printf '%s\n' SA_CREDENTIALS_DIR="$accounts_dir"
    fi
}

# Starts sidecar $1 (single|directory|baseline) in the background with its
# log in $work/$1.log; sets started_pid. start_wait then sets started_proxy
# and started_admin once it answers /readyz 200.
start_sidecar() {
    local vars bin=$lanyard_bin
    [[ $1 != baseline ]] || bin=$baseline_bin
    mapfile -t vars < <(sidecar_env "$1")
    env "${vars[@]}" LANYARD_ADMIN_LISTEN=127.0.0.1:0 "$bin" run >"$work/$1.log" 2>&1 &
    started_pid=$!
}
start_wait() {
    wait_for_line '"lanyard started"' 30 "$work/$1.log" || fatal "the $1 sidecar did not start"
    local line
    line=$(grep -m 1 '"lanyard started"' "$work/$1.log")
    started_proxy=http://$(grep -o '"proxy":"[^"]*"' <<<"$line" | cut -d '"' -f 4)
    started_admin=http://$(grep -o '"admin":"[^"]*"' <<<"$line" | cut -d '"' -f 4)
    wait_for_200 "$started_admin/readyz" 30 || fatal "the $1 sidecar was not ready within 30 s"
}

# Stops process $1 with SIGTERM; sets stopped_exit to its exit code.
stop_sidecar() {
    stopped_exit=0
    kill -TERM "$1"
    wait "$1" || stopped_exit=$?
}

# --- upstream and token endpoint ------------------------------------------
mapfile -t ports < <(python3 bench/run_probe.py free-ports 1)
upstream_url=http://127.0.0.1:${ports[0]}
user_line=
if ((EUID == 0)); then
    # nginx started as root hands its workers to `nobody`, who cannot enter
    # the private work directory; keep them as the caller.
    user_line="user $(id -un) $(id -gn);"
fi
# run.sh's upstream, as it is but for its /bench-authorization (which
# answers with the Authorization header it got): here under org-0001, a
# path the directory sidecar serves, so both sidecars are checked on the
# very path wrk then measures. An exact location, as before, so nginx
# matches no regular expression on the measured requests.
check_path=/organizations/org-0001/bench-authorization
sed -e "s|@DIR@|$work|g" -e "s|@USER_LINE@|$user_line|" -e "s|@WORKERS@|1|" \
    -e "s|@PORT@|${ports[0]}|" -e "s|location = /bench-authorization|location = $check_path|" \
    bench/nginx-upstream.conf.template >"$work/nginx-upstream.conf"
grep -qF "location = $check_path" "$work/nginx-upstream.conf" ||
    fatal "bench/nginx-upstream.conf.template has no /bench-authorization location to move"
mkdir -p "$work/nginx-upstream-tmp"
"$nginx_bin" -t -q -p "$work/" -c "$work/nginx-upstream.conf" -e "$work/nginx-upstream.error.log" ||
    fatal "nginx refused $work/nginx-upstream.conf"
"$nginx_bin" -p "$work/" -c "$work/nginx-upstream.conf" -e "$work/nginx-upstream.error.log" &
upstream_pid=$!
wait_for_200 "$upstream_url/" 30 || fatal "the upstream nginx did not answer"

mkdir "$work/mock"
"$mock_bin" "$work/mock" --expires-in "$expires_in" --accounts "$accounts" \
    >"$work/mock.out" 2>"$work/mock.err" &
mock_pid=$!
wait_for_line '^ready=1$' 120 "$work/mock.out" || fatal "the mock did not start"
credentials=$(sed -n 's/^credentials_a=//p' "$work/mock.out")
single_client=$(sed -n 's/^client_a=//p' "$work/mock.out")
accounts_dir=$(sed -n 's/^accounts_dir=//p' "$work/mock.out")
[[ -n $accounts_dir ]] || fatal "the mock printed no accounts_dir"

machine="$(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, $(uname -sr)"
load_start=$(cut -d ' ' -f 1-3 /proc/loadavg)
echo "accounts: $machine; load average $load_start"
echo "accounts: $accounts accounts in $accounts_dir, upstream $upstream_url, work directory $work"

# --- 1. start-up to ready --------------------------------------------------
echo "accounts: timing $startup_runs start-ups of each sidecar to /readyz 200, alternating"
startup_from=$(now_ms)
mkdir "$work/startup-single" "$work/startup-directory"
for ((run = 1; run <= startup_runs; run++)); do
    for kind in single directory; do
        mapfile -t vars < <(sidecar_env "$kind")
        env "${vars[@]}" LOG_DIR="$work/startup-$kind" \
            python3 bench/run_probe.py ready "$lanyard_bin" 1 >>"$work/startup-$kind.txt" ||
            fatal "timing the $kind sidecar's start-up failed"
    done
done
startup_to=$(now_ms)
field() { # the values of key $1 in the run_probe.py lines of file $2
    sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"
}
# The value of key $1 in the line of key=value words $2.
kv() {
    sed -n "s/\(^\|.* \)$1=\([^ ]*\).*/\2/p" <<<"$2"
}
startup_single=$(field ready_ms "$work/startup-single.txt" | median)
startup_single_token=$(field token_ms "$work/startup-single.txt" | median)
startup_directory=$(field ready_ms "$work/startup-directory.txt" | median)
startup_single_range=$(field ready_ms "$work/startup-single.txt" | sort -g | sed -n '1p;$p' | paste -sd / | sed 's|/| / |')
startup_directory_range=$(field ready_ms "$work/startup-directory.txt" | sort -g | sed -n '1p;$p' | paste -sd / | sed 's|/| / |')
[[ -z $(awk '$4 != "tokens=1" || $5 != "exit=0"' "$work/startup-single.txt") ]] ||
    fatal "a timed start of the single sidecar went wrong: $(cat "$work/startup-single.txt")"
[[ -z $(awk '$4 != "tokens=0" || $5 != "exit=0"' "$work/startup-directory.txt") ]] ||
    fatal "a timed start of the directory sidecar went wrong: $(cat "$work/startup-directory.txt")"

# --- 2. the two started together: RSS after start ----------------------------
t0=$(now_ms)
start_sidecar single
single_pid=$started_pid
start_sidecar directory
directory_pid=$started_pid
start_wait single
single_proxy=$started_proxy
single_admin=$started_admin
start_wait directory
directory_proxy=$started_proxy
directory_admin=$started_admin
ready_ms=$(($(now_ms) - t0))
rss_single_start=$(status_kib "$single_pid" VmRSS)
rss_directory_start=$(status_kib "$directory_pid" VmRSS)
threads_single=$(grep -m 1 -o '"worker_threads":[0-9]*' "$work/single.log" | cut -d : -f 2 || true)
threads_directory=$(grep -m 1 -o '"worker_threads":[0-9]*' "$work/directory.log" | cut -d : -f 2 || true)
echo "accounts: single $single_proxy, directory $directory_proxy, both ready $ready_ms ms after start;" \
    "proxy threads ${threads_single:-?} and ${threads_directory:-?}"

# --- 3. the first --window seconds: token requests -----------------------------
echo "accounts: traffic to $orgs_used organizations through both until $window s after their start"
python3 - "$((t0 + window * 1000))" "$orgs_used" "single=${single_proxy##*:}" \
    "directory=${directory_proxy##*:}" >"$work/traffic.txt" 2>&1 <<'PY' &
import http.client, sys, time

deadline_ms, orgs = int(sys.argv[1]), int(sys.argv[2])
ports = dict(arg.split("=") for arg in sys.argv[3:])
# One keep-alive connection per sidecar; a paced loop, not a load test: it
# only has to keep the organizations in use during the window.
conns = {name: http.client.HTTPConnection("127.0.0.1", int(port), timeout=30) for name, port in ports.items()}
requests = dict.fromkeys(ports, 0)
ok = dict.fromkeys(ports, 0)
while time.time() * 1000 < deadline_ms:
    tick = time.monotonic()
    for name, conn in conns.items():
        for n in range(1, orgs + 1):
            conn.request("GET", f"/organizations/org-{n:04d}/x")
            answer = conn.getresponse()
            answer.read()
            requests[name] += 1
            ok[name] += answer.status == 200
    time.sleep(max(0.0, min(0.1 - (time.monotonic() - tick), deadline_ms / 1000 - time.time())))
print(" ".join(f"{name}_requests={requests[name]} {name}_ok={ok[name]}" for name in ports))
PY
traffic_pid=$!
wait "$traffic_pid" || fatal "the window's traffic failed: $(cat "$work/traffic.txt")"
traffic_pid=
traffic=$(cat "$work/traffic.txt")
echo "accounts: in the window: $traffic"

# --- 4. every organization once, then RSS -----------------------------------
# Calls GET /organizations/org-NNNN/x for every organization of $3 once on
# port $1, $2 at a time: "requests=N ok=N seconds=S p50_ms=X p99_ms=Y".
touch_all() {
    python3 - "$1" "$2" "$3" <<'PY'
import concurrent.futures, http.client, sys, threading, time

port, concurrency, count = (int(a) for a in sys.argv[1:4])
local = threading.local()


def get(n):
    conn = getattr(local, "conn", None)
    if conn is None:
        conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.perf_counter()
    try:
        conn.request("GET", f"/organizations/org-{n:04d}/x")
        answer = conn.getresponse()
        answer.read()
        status = answer.status
    except OSError:
        local.conn = None
        status = 0
    return status, (time.perf_counter() - started) * 1000


started = time.perf_counter()
with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
    results = list(pool.map(get, range(1, count + 1)))
seconds = time.perf_counter() - started
ms = sorted(r[1] for r in results)
ok = sum(1 for r in results if r[0] == 200)
p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
print(f"requests={count} ok={ok} seconds={seconds:.2f} p50_ms={ms[len(ms) // 2]:.2f} p99_ms={p99:.2f}")
PY
}
echo "accounts: calling each of the $accounts organizations once, $touch_concurrency at a time"
touch_directory=$(touch_all "${directory_proxy##*:}" "$touch_concurrency" "$accounts")
touch_single=$(touch_all "${single_proxy##*:}" "$touch_concurrency" "$accounts")
rss_single_all=$(status_kib "$single_pid" VmRSS)
rss_directory_all=$(status_kib "$directory_pid" VmRSS)
readyz=$(curl -fsS "$directory_admin/readyz") || fatal "the directory sidecar's /readyz did not answer 200"
held=$(python3 -c 'import json, sys; a = json.loads(sys.argv[1])["accounts"]; print(a["ready"], a["total"])' "$readyz") ||
    fatal "no accounts report in /readyz: $readyz"
read -r held_ready held_total <<<"$held"
echo "accounts: directory: $touch_directory; single: $touch_single; $held_ready of $held_total accounts ready"

# --- 5. the request path, interleaved ------------------------------------
# Both sidecars must send a token on the measured path, each its own.
auth_single=$(curl -fsS "$single_proxy$check_path") || fatal "no answer through the single sidecar"
auth_directory=$(curl -fsS "$directory_proxy$check_path") || fatal "no answer through the directory sidecar"
[[ $auth_single == "Bearer mock-"* ]] || fatal "the single sidecar sent '$auth_single'"
[[ $auth_directory == "Bearer mock-"* ]] || fatal "the directory sidecar sent '$auth_directory'"
[[ $auth_single != "$auth_directory" ]] || fatal "both sidecars sent the same token"

declare -A url=([single]=$single_proxy [directory]=$directory_proxy)
declare -A pid=([single]=$single_pid [directory]=$directory_pid)
targets=(single directory)
if [[ -n $baseline_bin ]]; then
    start_sidecar baseline
    baseline_pid=$started_pid
    start_wait baseline
    auth_baseline=$(curl -fsS "$started_proxy$check_path") || fatal "no answer through the baseline sidecar"
    [[ $auth_baseline == "Bearer mock-"* ]] || fatal "the baseline sidecar sent '$auth_baseline'"
    url[baseline]=$started_proxy
    pid[baseline]=$baseline_pid
    targets+=(baseline)
fi
path=/organizations/org-0001/x
results=$work/results.tsv
printf 'connections\tround\ttarget\trequests\tduration_us\tp50_us\tp99_us\terrors\tcpu_ticks\n' >"$results"

# Measures $1 connections in round $2 through target $3, after a warm-up,
# and appends a line to $results.
measure() {
    local conns=$1 round=$2 name=$3 threads=2 out line before after
    ((threads <= conns)) || threads=$conns
    local wrk_cmd=(wrk --threads "$threads" --connections "$conns" --timeout 10s --script bench/run.lua)
    if ((warmup > 0)); then
        "${wrk_cmd[@]}" --duration "${warmup}s" "${url[$name]}$path" >/dev/null 2>&1 ||
            fatal "wrk warm-up failed: $name, $conns connections"
    fi
    out=$work/wrk-$conns-$round-$name.txt
    before=$(cpu_ticks "${pid[$name]}")
    "${wrk_cmd[@]}" --duration "${duration}s" "${url[$name]}$path" >"$out" 2>&1 ||
        fatal "wrk failed: $name, $conns connections (see $out)"
    after=$(cpu_ticks "${pid[$name]}")
    line=$(grep -m 1 '^BENCH ' "$out") || fatal "wrk printed no summary (see $out)"
    awk -v c="$conns" -v r="$round" -v t="$name" -v cpu=$((after - before)) '{
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        errors = v["connect"] + v["read"] + v["write"] + v["timeout"] + v["status"]
        printf "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", c, r, t, v["requests"], v["duration_us"],
            v["p50_us"], v["p99_us"], errors, cpu
    }' <<<"$line" >>"$results"
    awk -F'\t' 'END { printf "accounts:   %4s conns round %s %-9s %9.0f req/s  p50 %.3f ms  p99 %.3f ms  errors %d\n",
        $1, $2, $3, $4 / ($5 / 1e6), $6 / 1000, $7 / 1000, $8 }' "$results"
}

echo "accounts: GET $path, ${duration} s per run after ${warmup} s of warm-up:" \
    "$((${#conc_list[@]} * ${#targets[@]} * rounds)) runs"
for conns in "${conc_list[@]}"; do
    for ((round = 1; round <= rounds; round++)); do
        for ((i = 0; i < ${#targets[@]}; i++)); do
            measure "$conns" "$round" "${targets[(i + round - 1) % ${#targets[@]}]}"
        done
    done
done

# --- the end: counters and exits --------------------------------------------
curl -fsS "$single_admin/metrics" >"$work/metrics-single.txt" || fatal "cannot scrape the single sidecar"
curl -fsS "$directory_admin/metrics" >"$work/metrics-directory.txt" || fatal "cannot scrape the directory sidecar"
stop_sidecar "$single_pid"
single_exit=$stopped_exit
single_pid=
stop_sidecar "$directory_pid"
directory_exit=$stopped_exit
directory_pid=
baseline_exit=0
if [[ -n $baseline_pid ]]; then
    stop_sidecar "$baseline_pid"
    baseline_exit=$stopped_exit
    baseline_pid=
fi
single_token_requests=$(metric lanyard_token_requests_total "$work/metrics-single.txt")
directory_token_requests=$(metric lanyard_token_requests_total "$work/metrics-directory.txt")
directory_token_success=$(metric lanyard_token_requests_total "$work/metrics-directory.txt" 'outcome="success"')
# On SIGTERM the mock prints its counters and exits, having printed every
# token line before them.
kill -TERM "$mock_pid" 2>/dev/null || true
wait "$mock_pid" 2>/dev/null || true
mock_pid=
# The mock's token lines by client id, from $1 to $2 (ms since the epoch):
# "client_id count" lines. Read once the mock has exited, so that every
# line of a token request before $2 is in.
tokens_between() {
    awk -v from="$1" -v to="$2" '
        /^token_request=/ {
            ms = ""; id = "(none)"
            for (i = 1; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == "unix_ms") ms = kv[2]
                if (kv[1] == "client_id") id = kv[2]
            }
            if (ms >= from && ms < to) n[id]++
        }
        END { for (id in n) print id, n[id] }' "$work/mock.out"
}
# The timed starts: the directory's must have asked for nothing.
startup_directory_tokens=$(tokens_between "$startup_from" "$startup_to" | awk '$1 ~ /^sa-org-/ { n += $2 } END { print n + 0 }')
# Every account of the directory, one token request each from t0 on; the
# measured path's account once more for the baseline sidecar, if any.
run_tokens=$(tokens_between "$t0" "$(now_ms)")
run_directory_accounts=$(awk '$1 ~ /^sa-org-/ { n++ } END { print n + 0 }' <<<"$run_tokens")
twice=
[[ -z $baseline_bin ]] || twice=sa-org-0001
run_directory_not_one=$(awk -v twice="$twice" '$1 ~ /^sa-org-/ && $2 != 1 + ($1 == twice) { n++ } END { print n + 0 }' <<<"$run_tokens")
run_single=$(awk -v id="$single_client" '$1 == id { print $2 }' <<<"$run_tokens")
window_tokens=$(tokens_between "$t0" "$((t0 + window * 1000))")
window_single=$(awk -v id="$single_client" '$1 == id { print $2 }' <<<"$window_tokens")
window_directory=$(awk '$1 ~ /^sa-org-/ { n += $2 } END { print n + 0 }' <<<"$window_tokens")
window_used=$(awk -v k="$orgs_used" '$1 ~ /^sa-org-/ && substr($1, 8) + 0 <= k { n += $2 } END { print n + 0 }' <<<"$window_tokens")
window_other=$(awk '$1 !~ /^sa-/ { n += $2 } END { print n + 0 }' <<<"$window_tokens")
load_end=$(cut -d ' ' -f 1-3 /proc/loadavg)

# --- report ------------------------------------------------------------------
hz=$(getconf CLK_TCK)
cell() { # connections target column [round] -> the median over rounds, or the round's
    awk -F'\t' -v c="$1" -v t="$2" -v col="$3" -v r="${4-}" -v hz="$hz" '
        $1 == c && $3 == t && (r == "" || $2 == r) {
            if (col == "rps") print $4 / ($5 / 1e6)
            else if (col == "p50") print $6 / 1000
            else if (col == "p99") print $7 / 1000
            else if (col == "cpu") print ($4 ? $9 / hz * 1e6 / $4 : 0)
        }' "$results" | median
}
errors_of() {
    awk -F'\t' -v c="$1" -v t="$2" '$1 == c && $3 == t { n += $8 } END { print n + 0 }' "$results"
}
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'
}
# Target $3 (default directory) over target $4 (default single) in column
# $2 at $1 connections: the ratio of the medians, and with rounds, the
# lowest and highest of the rounds' own.
ratio_cell() {
    local text round over=${3:-directory} under=${4:-single}
    text=$(ratio "$(cell "$1" "$over" "$2")" "$(cell "$1" "$under" "$2")")
    if ((rounds > 1)); then
        text+=" ($(for ((round = 1; round <= rounds; round++)); do
            ratio "$(cell "$1" "$over" "$2" "$round")" "$(cell "$1" "$under" "$2" "$round")"
            echo
        done | sort -g | awk 'NR == 1 { low = $1 } { high = $1 } END { printf "%s-%s", low, high }'))"
    fi
    echo "$text"
}
rule() { printf '%.0s-' {1..100} && echo; }
row() { printf '%-56s %-20s %s\n' "$1" "$2" "$3"; }
kib() { awk -v k="$1" 'BEGIN { printf "%.1f KiB", k }'; }

rounds_note="one round"
((rounds == 1)) || rounds_note="median of $rounds rounds"
versions="lanyard $("$lanyard_bin" --version | awk '{ print $NF }'), nginx $("$nginx_bin" -v 2>&1 | sed 's|.*/||')"
versions+=", wrk $(wrk --version 2>&1 | awk 'NR == 1 { print $2 }' || true)"
grow_single=$((rss_single_all - rss_single_start))
grow_directory=$((rss_directory_all - rss_directory_start))
# What an account costs (docs/accounts.md, "Memory"): a file
# at start, its directory's RSS at ready over the single sidecar's; and
# once called, the directory's growth over the N calls.
per_file=$(awk -v d="$rss_directory_start" -v s="$rss_single_start" -v n="$accounts" 'BEGIN { printf "%.1f", (d - s) / n }')
per_called=$(awk -v g="$grow_directory" -v n="$accounts" 'BEGIN { printf "%.1f", g / n }')
per_account=$(awk -v f="$per_file" -v c="$per_called" 'BEGIN { printf "%.1f", f + c }')
net_called=$(awk -v d="$grow_directory" -v s="$grow_single" -v n="$accounts" 'BEGIN { printf "%.1f", (d - s) / n }')
total_errors=0
for conns in "${conc_list[@]}"; do
    for name in "${targets[@]}"; do
        total_errors=$((total_errors + $(errors_of "$conns" "$name")))
    done
done

echo
echo "lanyard with many accounts, $(date -u '+%Y-%m-%d %H:%M UTC'), $versions"
echo "machine: $machine; load average $load_start at the start, $load_end at the end"
[[ -z $given_bin ]] || echo "binary: $lanyard_bin (--binary: not a release build unless it is one)"
echo "single: SA_CREDENTIALS_FILE (one account); directory: SA_CREDENTIALS_DIR of $accounts files," \
    "one organization each, no default account; both the same binary, ${threads_single:-?} proxy threads," \
    "forwarding to an nginx upstream on loopback; the mock's tokens last ${expires_in} s"
rule
row "measure" "single" "directory"
rule
row "start-up to /readyz 200, median of $startup_runs" \
    "$(printf '%.1f ms' "$startup_single")" "$(printf '%.1f ms' "$startup_directory")"
row "  fastest / slowest" "$startup_single_range ms" "$startup_directory_range ms"
row "  of which the token request (its /metrics)" "$(printf '%.1f ms' "$startup_single_token")" \
    "none ($startup_directory_tokens token requests in its $startup_runs starts)"
row "RSS at /readyz 200, before any request" "$(mib "$rss_single_start")" "$(mib "$rss_directory_start")"
row "RSS after $accounts requests, one per organization" "$(mib "$rss_single_all")" \
    "$(mib "$rss_directory_all") ($held_ready of $held_total accounts holding a token)"
row "  growth" "$(mib "$grow_single")" "$(mib "$grow_directory")"
row "memory per account, once called" "" \
    "$(kib "$per_account"): $(kib "$per_file") a file at start + $(kib "$per_called") once called"
row "  once called, net of single's growth over as many requests" "" "$(kib "$net_called")"
row "token requests in the first $window s, $orgs_used orgs called" "${window_single:-0}" \
    "$window_directory: $window_used for the $orgs_used orgs used, $((window_directory - window_used)) for the other $((accounts - orgs_used))"
row "  that traffic's requests (answered 200)" "$(kv single_requests "$traffic") ($(kv single_ok "$traffic"))" \
    "$(kv directory_requests "$traffic") ($(kv directory_ok "$traffic"))"
row "$accounts requests, $touch_concurrency at a time: seconds" "$(kv seconds "$touch_single")" \
    "$(kv seconds "$touch_directory") (each first request waits for its token)"
row "  p50 / p99 ms" "$(kv p50_ms "$touch_single") / $(kv p99_ms "$touch_single")" \
    "$(kv p50_ms "$touch_directory") / $(kv p99_ms "$touch_directory")"
row "  answered 200" "$(kv ok "$touch_single")" "$(kv ok "$touch_directory")"
row "token requests over the run (/metrics)" "$single_token_requests" \
    "$directory_token_requests ($directory_token_success success, $run_directory_accounts accounts)"
rule
echo "GET $path (the upstream answers 200 \"ok\"), ${duration} s per run after ${warmup} s of warm-up, $rounds_note"
printf '%-11s  %-9s %10s %10s %10s %14s %7s\n' connections target req/s "p50 ms" "p99 ms" "CPU us/req" errors
for conns in "${conc_list[@]}"; do
    for name in "${targets[@]}"; do
        printf '%-11s  %-9s %10.0f %10.3f %10.3f %14.1f %7d\n' "$conns" "$name" \
            "$(cell "$conns" "$name" rps)" "$(cell "$conns" "$name" p50)" "$(cell "$conns" "$name" p99)" \
            "$(cell "$conns" "$name" cpu)" "$(errors_of "$conns" "$name")"
    done
done
echo "(CPU us/req: the sidecar's user + system CPU time per request, from /proc/PID/stat)"
echo
range_note=
((rounds == 1)) || range_note=", in brackets the lowest and highest of the rounds' own ratios"
echo "directory / single (req/s above 1 is faster; CPU and p99 below 1 are better$range_note)"
printf '%-11s  %21s %21s %21s\n' connections req/s "CPU us/req" p99
for conns in "${conc_list[@]}"; do
    printf '%-11s  %21s %21s %21s\n' "$conns" "$(ratio_cell "$conns" rps)" "$(ratio_cell "$conns" cpu)" \
        "$(ratio_cell "$conns" p99)"
done
if [[ -n $baseline_bin ]]; then
    echo
    echo "baseline: $baseline_bin, a directory sidecar as directory is"
    echo "directory / baseline, after / before (req/s above 1 is faster; CPU and p99 below 1 are better$range_note)"
    printf '%-11s  %21s %21s %21s\n' connections req/s "CPU us/req" p99
    for conns in "${conc_list[@]}"; do
        printf '%-11s  %21s %21s %21s\n' "$conns" "$(ratio_cell "$conns" rps directory baseline)" \
            "$(ratio_cell "$conns" cpu directory baseline)" "$(ratio_cell "$conns" p99 directory baseline)"
    done
fi
rule

# --- verdict ---------------------------------------------------------------
problems=()
((total_errors == 0)) || problems+=("wrk saw $total_errors failed requests")
for kind in single directory; do
    [[ $(kv "${kind}_ok" "$traffic") == "$(kv "${kind}_requests" "$traffic")" ]] ||
        problems+=("$kind: $(kv "${kind}_ok" "$traffic") of the window's $(kv "${kind}_requests" "$traffic") requests answered 200")
done
for kind in single directory; do
    line=touch_$kind
    [[ $(kv ok "${!line}") == "$accounts" ]] || problems+=("$kind: $(kv ok "${!line}") of $accounts calls answered 200")
done
((${window_single:-0} == 1)) || problems+=("the single sidecar made ${window_single:-0} token requests in the window, not 1")
((window_used == orgs_used && window_directory == orgs_used)) ||
    problems+=("the directory made $window_directory token requests in the window ($window_used for the orgs used), not $orgs_used")
((window_other == 0)) || problems+=("$window_other token requests in the window from no known account")
((startup_directory_tokens == 0)) || problems+=("the directory's timed starts made $startup_directory_tokens token requests")
((run_directory_accounts == accounts && run_directory_not_one == 0)) ||
    problems+=("the mock saw $run_directory_accounts of $accounts directory accounts ask, $run_directory_not_one of them other than once")
((${run_single:-0} == 1 && single_token_requests == 1)) || problems+=("the single sidecar made ${run_single:-0} token requests, not 1")
((directory_token_requests == accounts && directory_token_success == accounts)) ||
    problems+=("the directory counted $directory_token_requests token requests ($directory_token_success success), not $accounts")
((held_ready == accounts && held_total == accounts)) || problems+=("$held_ready of $held_total accounts held a token, not $accounts")
((single_exit == 0 && directory_exit == 0)) || problems+=("exit on SIGTERM: single $single_exit, directory $directory_exit")
((baseline_exit == 0)) || problems+=("the baseline sidecar exited $baseline_exit on SIGTERM")
if ((${#problems[@]})); then
    failed=1
    printf 'accounts: FAILED: %s\n' "${problems[@]}"
    exit 1
fi
((keep)) && echo "accounts: raw results in $work"
echo "accounts: passed"
