#!/usr/bin/env bash
# Fleet simulation: many sidecars against one token endpoint, to
# show what a fleet asks of that endpoint in steady state, during its outage
# and when it returns, and that no app request fails while its sidecar holds
# a valid token. Not part of `cargo test` or .ci/run: about four minutes
# with the defaults, the release build aside.
#
#   bench/fleet.sh [options]
#
#   --sidecars N        `lanyard run` processes (default 100)
#   --expires-in S      token lifetime the mock grants (default 20)
#   --start-over S      start the sidecars evenly over S seconds (default
#                       one mean renewal interval, 0.775 x the lifetime,
#                       so that they renew evenly, as a fleet that has run
#                       for a while does); 0 starts them all at once, as a
#                       rollout or the end of an outage leaves a fleet:
#                       they then renew, and fail, in clumps for many
#                       lifetimes (the 70-85% jitter spreads them slowly)
#   --steady S          seconds of steady state measured, after a warm-up
#                       of one token lifetime (default 60)
#   --outage S          seconds the token endpoint answers 503 to every
#                       request (default three token lifetimes, so every
#                       held token expires)
#   --recovery S        seconds measured after the endpoint returns
#                       (default 60)
#   --no-build          use the binaries already in target/release
#   --keep              keep the work directory (kept anyway on failure)
#
# Everything listens on 127.0.0.1. One mock (examples/mock_service.rs, one
# thread) serves the token endpoint and the API; N `lanyard run` processes,
# each with LANYARD_WORKER_THREADS=1 and its own proxy and admin port
# (port 0: the kernel picks), share one credentials file. bench/fleet.py
# sends `GET /` through every sidecar every 0.5-1 s and records each answer.
# The mock prints every token request with its time; SIGUSR1 and SIGUSR2
# start and end its outage.
#
# The phases: start-up, warm-up (one lifetime), steady state, outage,
# recovery. A second into the outage each sidecar's
# lanyard_token_expiry_timestamp_seconds is read: it is the held token's
# retirement (its expiry less LANYARD_EXPIRY_MARGIN, docs/tokens.md "Token
# lifetime"), and until then the sidecar holds a token it may send. Each
# failed token request is put down to its sidecar by the sidecar's log
# ("token request failed"), so that those sent while a token was still
# held are told apart from the no-token phase's.
#
# Reported, as a table: token requests per second in steady state against
# the expected N / (0.775 x lifetime) (renewal at a uniform 70-85% of the
# lifetime), and its busiest second (any 1000 ms window); in the outage,
# the busiest second of the requests sent by sidecars that still held a
# token (their failed renewals and the retries before each one's
# retirement), against the steady state's and the no-token phase's; during
# the whole outage, and once no token is held anywhere, against the rule
# (retries at most 15 s apart: 7.5-15 s once a jittered backoff is capped,
# N/15 to N/7.5 a second); the busiest second after the endpoint returns;
# proxied requests by phase; the sidecars' RSS (sum and per process of
# VmRSS), threads and CPU.
# Token requests per second over the whole run go to token-rate.tsv in the
# work directory.
#
# Exit 1 unless all of these hold:
#   - no failed proxied request while the sidecar held a valid token: in
#     steady state, in the outage before the held token's retirement, and
#     in recovery from the sidecar's first success on. A request is judged
#     by when lanyard could have seen it: its send and its answer are
#     timed to the microsecond, and only one answered before the
#     retirement counts as seen with a valid token (one sent a moment
#     before and seen a moment after is in transit, not a failure). Elsewhere lanyard's
#     own 503 token_unavailable is expected and counted apart; any other
#     failure there fails the run too;
#   - with tokens of 60 s or more, the outage's busiest second of token
#     requests from sidecars that still hold a token has fewer than N/5,
#     about the no-token phase's own busiest second (attempts 7.5-15 s
#     apart, N/11.25 a second on average): retries while a token is held
#     are spread over the time it has left (docs/tokens.md "Renewal and retries"),
#     so a fleet whose renewals fail together does not retry together.
#     A fleet started at once (--start-over 0) renews in clumps whose
#     failed renewals alone come near N/7 in a second; there, with a
#     retry or two each, expect this check to fail. Shorter tokens are
#     reported, not judged: their renewals alone come at N/15 a second or
#     more;
#   - the busiest second of recovery has fewer than N/2 token requests:
#     jitter must keep the fleet from returning in step (without it, all N
#     would come in the same second);
#   - every lanyard exits 0 on SIGTERM.
# Exit 2 on bad options or a missing tool.
set -euo pipefail
prog=fleet
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

sidecars=100
expires_in=20
start_over=
steady=60
outage=
recovery=60
build=1
keep=0

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

die_usage() {
    echo "fleet: $1" >&2
    echo "usage: bench/fleet.sh [--sidecars N] [--expires-in S] [--steady S] [--outage S] ... (--help)" >&2
    exit 2
}

while (($#)); do
    case $1 in
    --sidecars | --expires-in | --start-over | --steady | --outage | --recovery)
        number "$1" "${2-}"
        case $1 in
        --sidecars) sidecars=$2 ;;
        --expires-in) expires_in=$2 ;;
        --start-over) start_over=$2 ;;
        --steady) steady=$2 ;;
        --outage) outage=$2 ;;
        --recovery) recovery=$2 ;;
        esac
        shift 2
        ;;
    --no-build) build=0 && shift ;;
    --keep) keep=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die_usage "unknown option $1" ;;
    esac
done
outage=${outage:-$((3 * expires_in))}
start_over=${start_over:-$(((expires_in * 775 + 500) / 1000))}
((sidecars >= 1)) || die_usage "--sidecars must be at least 1"
# lanyard refuses nothing shorter, but the phases need whole renewals.
((expires_in >= 5)) || die_usage "--expires-in must be at least 5"
((steady >= 10)) || die_usage "--steady must be at least 10 (seconds measured)"
# The expiries are read a second into the outage.
((outage >= 2)) || die_usage "--outage must be at least 2"
((recovery >= 5)) || die_usage "--recovery must be at least 5"

install_missing curl:curl awk:gawk python3:python3
release_binaries

work=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-fleet.XXXXXX")
mock_pid=
load_pid=
pids=()
failed_checks=0

stop() {
    local pid
    for pid in "$load_pid" "${pids[@]}" "$mock_pid"; do
        if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    wait 2>/dev/null || true
}

cleanup() {
    stop
    if ((keep || failed_checks)); then
        echo "fleet: logs kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'failed_checks=1; exit 1' INT TERM

fatal() {
    echo "fleet: FATAL: $1" >&2
    failed_checks=1
    exit 1
}

# Fails the run if the mock, the load or any sidecar has exited.
alive() {
    local i
    kill -0 "$mock_pid" 2>/dev/null || fatal "the mock exited (see $work/mock.err)"
    [[ -z $load_pid ]] || kill -0 "$load_pid" 2>/dev/null || fatal "the load generator exited (see $work/load.err)"
    for i in "${!pids[@]}"; do
        kill -0 "${pids[$i]}" 2>/dev/null || fatal "lanyard $i exited (see $work/lanyard-$i.log)"
    done
}

# Waits until the wall clock reaches $1 (ms), checking every second that
# everything still runs.
wait_until() {
    local left
    while left=$(($1 - $(now_ms))) && ((left > 0)); do
        alive
        if ((left > 1000)); then
            sleep 1
        else
            sleep "0.$(printf '%03d' "$left")"
        fi
    done
}

# --- the mock ---------------------------------------------------------------
"$mock_bin" "$work" --expires-in "$expires_in" >"$work/mock.out" 2>"$work/mock.err" &
mock_pid=$!
wait_for_line '^ready=1$' 60 "$work/mock.out" || fatal "the mock did not start (see $work/mock.err)"
mock_value() {
    sed -n "s/^$1=//p" "$work/mock.out" | head -n 1
}
api_url=$(mock_value api_url)
credentials=$(mock_value credentials_a)

# --- the sidecars -----------------------------------------------------------
echo "fleet: starting $sidecars sidecars over ${start_over} s (tokens of ${expires_in} s); work dir $work"
start_ms=$(now_ms)
for ((i = 0; i < sidecars; i++)); do
    wait_until $((start_ms + i * start_over * 1000 / sidecars))
    env SERVICE_API_URL="$api_url" SA_CREDENTIALS_FILE="$credentials" \
        LANYARD_LISTEN=127.0.0.1:0 LANYARD_ADMIN_LISTEN=127.0.0.1:0 \
        LANYARD_WORKER_THREADS=1 LANYARD_LOG_FORMAT=json RUST_LOG=info \
        "$lanyard_bin" run >"$work/lanyard-$i.log" 2>&1 &
    pids+=($!)
done
: >"$work/sidecars.txt"
for ((i = 0; i < sidecars; i++)); do
    wait_for_line '"lanyard started"' 60 "$work/lanyard-$i.log" || fatal "lanyard $i did not start"
    started=$(grep -m 1 '"lanyard started"' "$work/lanyard-$i.log")
    proxy=$(grep -o '"proxy":"[^"]*"' <<<"$started" | cut -d '"' -f 4)
    admin=$(grep -o '"admin":"[^"]*"' <<<"$started" | cut -d '"' -f 4)
    echo "$proxy $admin ${pids[$i]}" >>"$work/sidecars.txt"
done
# The first token, not /readyz: readiness wants 10 s of validity, which a
# short token has only for a while.
for ((i = 0; i < sidecars; i++)); do
    wait_for_line '"token obtained"' 60 "$work/lanyard-$i.log" || fatal "lanyard $i obtained no token"
done
echo "fleet: all $sidecars hold a token after $((($(now_ms) - start_ms) / 1000)) s"

# --- the phases -------------------------------------------------------------
python3 bench/fleet.py load "$work/sidecars.txt" "$work/requests.txt" 2>"$work/load.err" &
load_pid=$!
echo "fleet: load started: GET / through every sidecar every 0.5-1 s; warm-up ${expires_in} s"
wait_until $(($(now_ms) + expires_in * 1000))
steady_from=$(now_ms)
python3 bench/fleet.py scrape "$work/sidecars.txt" "$work/scrape-steady.txt"
echo "fleet: steady state, ${steady} s"
wait_until $((steady_from + steady * 1000))

echo "fleet: outage of the token endpoint, ${outage} s"
kill -USR1 "$mock_pid"
wait_for_line '^token_outage=on ' 10 "$work/mock.out" || fatal "the mock did not start the outage"
outage_from=$(sed -n 's/^token_outage=on unix_ms=//p' "$work/mock.out")
# A token request answered just before the switch has landed by now.
wait_until $((outage_from + 1000))
python3 bench/fleet.py scrape "$work/sidecars.txt" "$work/scrape-outage.txt"
wait_until $((outage_from + outage * 1000))
kill -USR2 "$mock_pid"
wait_for_line '^token_outage=off ' 10 "$work/mock.out" || fatal "the mock did not end the outage"
outage_to=$(sed -n 's/^token_outage=off unix_ms=//p' "$work/mock.out")
echo "fleet: the token endpoint is back; recovery, ${recovery} s"
wait_until $((outage_to + recovery * 1000))
end_ms=$(now_ms)
alive
kill -TERM "$load_pid"
wait "$load_pid" || fatal "the load generator failed (see $work/load.err)"
load_pid=

# --- the report, while the sidecars still run (for their RSS) ---------------
report_exit=0
python3 bench/fleet.py report --sidecars-file "$work/sidecars.txt" \
    --requests "$work/requests.txt" --mock-out "$work/mock.out" \
    --scrape-steady "$work/scrape-steady.txt" --scrape-outage "$work/scrape-outage.txt" \
    --series "$work/token-rate.tsv" --logs "$work" \
    --sidecars "$sidecars" --expires-in "$expires_in" --start-over "$start_over" \
    --steady-from-ms "$steady_from" --end-ms "$end_ms" \
    --mock-pid "$mock_pid" || report_exit=$?
((report_exit <= 1)) || fatal "the report failed (exit $report_exit)"

for pid in "${pids[@]}"; do
    kill -TERM "$pid"
done
unclean=0
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || unclean=$((unclean + 1))
done
pids=()
kill -TERM "$mock_pid"
wait "$mock_pid" || true
mock_pid=
errors=$(cat "$work"/lanyard-*.log | grep -c '"level":"ERROR"' || true)
echo "lanyard exits on SIGTERM: $((sidecars - unclean)) of $sidecars with 0$( ((unclean)) && echo ': FAIL')"
echo "lanyard ERROR log lines, all sidecars: $errors"
echo "run time: $((($(now_ms) - start_ms) / 1000)) s from the first sidecar's start"
if ((report_exit || unclean)); then
    failed_checks=1
    echo "fleet: FAILED"
    exit 1
fi
echo "fleet: passed"
