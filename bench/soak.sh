#!/usr/bin/env bash
# Soak run: sustained load through the release `lanyard run` binary, with
# tokens of a short lifetime and a credentials rotation midway, to show that
# no request fails, renewals keep pace, the new account is picked up, and
# memory stays flat. Not part of `cargo test` or .ci/run: it takes ten
# minutes by default.
#
#   bench/soak.sh [options]
#
#   --duration S        load duration in seconds (default 600)
#   --rotate-at S       when to rotate the credentials, in seconds from the
#                       start of the load (default half the duration)
#   --warmup S          when to take the starting RSS (default 30)
#   --rate N            target requests per second in all (default 1000;
#                       0 = as fast as the machine goes)
#   --connections N     keep-alive connections (default 16)
#   --threads N         wrk threads (default 2)
#   --expires-in S      token lifetime the mock grants (default 60)
#   --rss-slack-mib N   allowed RSS growth, start to end (default 5)
#   --no-build          use the binaries already in target/release
#   --keep              keep the work directory (kept anyway on failure)
#
# Everything listens on 127.0.0.1. The mock (examples/mock_service.rs) writes
# credentials for accounts A and B; lanyard starts on A's file, and at
# --rotate-at the file is replaced by B's with a rename over it, as a
# deployment tool does. wrk (bench/soak.lua) alternates `GET /`, whose
# answer names the account of the token, with a GET of a verification rule,
# which the mock authorizes by role and project group.
#
# Exit 1 unless all of these hold:
#   - no failed request: every answer 2xx, no connect/read/write/timeout
#     error;
#   - the rotation was picked up: a proxied request named account B within
#     10 s of the rename (docs/tokens.md "Credential rotation"), lanyard counted one successful
#     reload, and no answer named account A later than a second after that;
#   - RSS flat: at the end no more than --rss-slack-mib above the RSS at the
#     end of the warm-up (lanyard's RSS is about 12 MiB here, so 5 MiB
#     is generous for noise and tight for a per-request or per-token leak);
#   - lanyard exits 0 on SIGTERM.
# Exit 2 on bad options or a missing tool.
set -euo pipefail
prog=soak
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

duration=600
rotate_at=
warmup=30
rate=1000
connections=16
threads=2
expires_in=60
rss_slack_mib=5
build=1
keep=0
# docs/tokens.md "Credential rotation": a changed credentials file is noticed within 10 s.
pickup_limit_s=10

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

die_usage() {
    echo "soak: $1" >&2
    echo "usage: bench/soak.sh [--duration S] [--rotate-at S] [--warmup S] [--rate N] ... (--help)" >&2
    exit 2
}

while (($#)); do
    case $1 in
    --duration | --rotate-at | --warmup | --rate | --connections | --threads | --expires-in | --rss-slack-mib)
        number "$1" "${2-}"
        case $1 in
        --duration) duration=$2 ;;
        --rotate-at) rotate_at=$2 ;;
        --warmup) warmup=$2 ;;
        --rate) rate=$2 ;;
        --connections) connections=$2 ;;
        --threads) threads=$2 ;;
        --expires-in) expires_in=$2 ;;
        --rss-slack-mib) rss_slack_mib=$2 ;;
        esac
        shift 2
        ;;
    --no-build) build=0 && shift ;;
    --keep) keep=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die_usage "unknown option $1" ;;
    esac
done
rotate_at=${rotate_at:-$((duration / 2))}
((connections > 0 && threads > 0 && threads <= connections)) ||
    die_usage "--threads must be between 1 and --connections"
((warmup < rotate_at)) || die_usage "--warmup ($warmup) must come before --rotate-at ($rotate_at)"
# After the rotation: the pickup window, then some load on the new account.
((rotate_at + pickup_limit_s + 5 <= duration)) ||
    die_usage "--duration must leave at least $((pickup_limit_s + 5)) s after --rotate-at"

install_missing wrk:wrk curl:curl awk:gawk
release_binaries

work=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-soak.XXXXXX")
mock_pid=
lanyard_pid=
wrk_pid=
failed_checks=0

stop() {
    local pid
    for pid in "$wrk_pid" "$lanyard_pid" "$mock_pid"; do
        if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    wait 2>/dev/null || true
}

cleanup() {
    stop
    if ((keep || failed_checks)); then
        echo "soak: logs kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'failed_checks=1; exit 1' INT TERM

fatal() {
    echo "soak: FATAL: $1" >&2
    failed_checks=1
    for log in lanyard.log mock.out wrk.log; do
        if [[ -s $work/$log ]]; then
            echo "--- last lines of $log" >&2
            tail -n 5 "$work/$log" >&2
        fi
    done
    exit 1
}

open_fds() {
    local entries=("/proc/$1/fd/"*)
    echo "${#entries[@]}"
}

# --- the mock, with two accounts ---------------------------------------
"$mock_bin" "$work" --expires-in "$expires_in" >"$work/mock.out" 2>"$work/mock.err" &
mock_pid=$!
wait_for_line '^ready=1$' 60 "$work/mock.out" || fatal "the mock did not start (see $work/mock.err)"
mock_value() {
    sed -n "s/^$1=//p" "$work/mock.out" | head -n 1
}
api_url=$(mock_value api_url)
client_a=$(mock_value client_a)
client_b=$(mock_value client_b)
credentials_b=$(mock_value credentials_b)
rule_path=/organizations/$(mock_value organization_id)/projects/$(mock_value project_id)/verifications/$(mock_value rule_id)
credentials=$work/credentials.json
cp "$(mock_value credentials_a)" "$credentials"

# --- lanyard, on account A ----------------------------------------------
# Port 0: the kernel picks free ports and lanyard logs them at start-up.
env SERVICE_API_URL="$api_url" SA_CREDENTIALS_FILE="$credentials" \
    LANYARD_LISTEN=127.0.0.1:0 LANYARD_ADMIN_LISTEN=127.0.0.1:0 \
    LANYARD_LOG_FORMAT=json RUST_LOG=info \
    "$lanyard_bin" run >"$work/lanyard.log" 2>&1 &
lanyard_pid=$!
wait_for_line '"lanyard started"' 30 "$work/lanyard.log" || fatal "lanyard did not start"
started=$(grep -m 1 '"lanyard started"' "$work/lanyard.log")
proxy=http://$(grep -o '"proxy":"[^"]*"' <<<"$started" | cut -d '"' -f 4)
admin=http://$(grep -o '"admin":"[^"]*"' <<<"$started" | cut -d '"' -f 4)

deadline=$(($(now_ms) + 30000))
until curl -fsS -o /dev/null "$admin/readyz" 2>/dev/null; do
    (($(now_ms) < deadline)) || fatal "lanyard not ready after 30 s"
    kill -0 "$lanyard_pid" 2>/dev/null || fatal "lanyard exited"
    sleep 0.2
done
first=$(curl -fsS "$proxy/") || fatal "the first request through lanyard failed"
[[ $first == *"\"client_id\":\"$client_a\""* ]] || fatal "the first request was not served as $client_a: $first"

# --- load ---------------------------------------------------------------
delay_ms=0
if ((rate > 0)); then
    # Each connection waits this long between answer and next request.
    delay_ms=$((connections * 1000 / rate))
fi
target_rate=unlimited
((rate == 0)) || target_rate="$rate req/s"
echo "soak: ${duration}s of load through lanyard (pid $lanyard_pid): $connections connections," \
    "target $target_rate, tokens of ${expires_in}s, rotation to $client_b at ${rotate_at}s;" \
    "work dir $work"
SOAK_RULE_PATH=$rule_path SOAK_DELAY_MS=$delay_ms SOAK_WRK_OUT=$work/wrk.tally \
    wrk --threads "$threads" --connections "$connections" --duration "${duration}s" \
    --timeout 10s --script bench/soak.lua "$proxy/" >"$work/wrk.log" 2>&1 &
wrk_pid=$!
load_start=$(now_ms)

rss_start=
rss_end=0
rss_max=0
fds_start=
fds_end=0
rotated_ms=
picked_ms=
echo "elapsed_s rss_kib fds" >"$work/rss.tsv"
next_report=60

rotate() {
    # A rename over the file, as Ansible or an editor's atomic save does;
    # lanyard polls for it.
    cp "$credentials_b" "$credentials.new"
    mv "$credentials.new" "$credentials"
    rotated_ms=$(now_ms)
    echo "soak: $(((rotated_ms - load_start) / 1000))s: credentials file replaced with $client_b's"
    local deadline=$((rotated_ms + pickup_limit_s * 1000)) body
    while (($(now_ms) < deadline)); do
        body=$(curl -sS --max-time 2 "$proxy/" 2>/dev/null || true)
        if [[ $body == *"\"client_id\":\"$client_b\""* ]]; then
            picked_ms=$(now_ms)
            echo "soak: rotation picked up after $(((picked_ms - rotated_ms) / 1000)).$((((picked_ms - rotated_ms) % 1000) / 100))s"
            return
        fi
        sleep 0.2
    done
    echo "soak: rotation NOT picked up within ${pickup_limit_s}s"
}

while kill -0 "$wrk_pid" 2>/dev/null; do
    kill -0 "$lanyard_pid" 2>/dev/null || fatal "lanyard exited during the load"
    elapsed=$((($(now_ms) - load_start) / 1000))
    rss=$(status_kib "$lanyard_pid" VmRSS)
    fds=$(open_fds "$lanyard_pid")
    echo "$elapsed $rss $fds" >>"$work/rss.tsv"
    if ((elapsed >= warmup)); then
        if [[ -z $rss_start ]]; then
            rss_start=$rss
            fds_start=$fds
            echo "soak: ${elapsed}s: warm-up over, lanyard RSS $(mib "$rss"), $fds open files"
        fi
        if ((rss > rss_max)); then
            rss_max=$rss
        fi
        # The last sample while the load still runs is the end.
        rss_end=$rss
        fds_end=$fds
    fi
    if [[ -z $rotated_ms ]] && ((elapsed >= rotate_at)); then
        rotate
    fi
    if ((elapsed >= next_report)); then
        echo "soak: ${elapsed}s: lanyard RSS $(mib "$rss"), $fds open files"
        next_report=$((next_report + 60))
    fi
    sleep 1
done
wait "$wrk_pid" || fatal "wrk failed (see $work/wrk.log)"
wrk_pid=
[[ -s $work/wrk.tally ]] || fatal "wrk left no tally"
[[ -n $rss_start ]] || fatal "the load ended before the warm-up did"

# --- lanyard's and the mock's own counts --------------------------------
sleep 1 # let the last answers be counted
curl -fsS "$admin/metrics" >"$work/metrics.txt" || fatal "cannot scrape $admin/metrics"
kill -TERM "$lanyard_pid"
lanyard_exit=0
wait "$lanyard_pid" || lanyard_exit=$?
lanyard_pid=
kill -TERM "$mock_pid"
wait "$mock_pid" || true
mock_pid=

requests=$(awk '$1 == "requests" { print $2 }' "$work/wrk.tally")
duration_us=$(awk '$1 == "duration_us" { print $2 }' "$work/wrk.tally")
non_2xx=$(awk '$1 == "status" && ($2 < 200 || $2 > 299) { n += $3 } END { print n + 0 }' "$work/wrk.tally")
socket_errors=$(awk '$1 == "error" && $2 != "status" { n += $3 } END { print n + 0 }' "$work/wrk.tally")
statuses=$(awk '$1 == "status" { printf "%s%s x%d", sep, $2, $3; sep = ", " }' "$work/wrk.tally")
failed=$((non_2xx + socket_errors))
latency() {
    awk -v p="$1" '$1 == "latency_us" && $2 == p { printf "%.1f", $3 / 1000 }' "$work/wrk.tally"
}
picked_s=$((${picked_ms:-0} / 1000))
rotated_s=$((${rotated_ms:-0} / 1000))
# Answers per account in the seconds after $2 (wrk's clock has whole
# seconds): answers naming A are expected between the rename and the pickup,
# while the old token serves; past the second after the pickup none is.
count_client() {
    awk -v id="$1" -v after="${2:-0}" '$1 == "client" && $2 == id && $3 > after { n += $4 } END { print n + 0 }' \
        "$work/wrk.tally"
}
a_total=$(count_client "$client_a")
b_total=$(count_client "$client_b")
a_after_rename=$(count_client "$client_a" $((rotated_s - 1)))
a_after_pickup=$(count_client "$client_a" $((picked_s + 1)))
b_after_pickup=$(count_client "$client_b" $((picked_s + 1)))

m=$work/metrics.txt
token_total=$(metric lanyard_token_requests_total "$m")
token_success=$(metric lanyard_token_requests_total "$m" 'outcome="success"')
reload_success=$(metric lanyard_credentials_reloads_total "$m" 'outcome="success"')
reload_other=$(($(metric lanyard_credentials_reloads_total "$m") - reload_success))
proxy_total=$(metric lanyard_proxy_requests_total "$m")
proxy_non_2xx=$(metric lanyard_proxy_requests_total "$m" 'code="[^2]')
upstream_errors=$(metric lanyard_upstream_errors_total "$m")
retries_401=$(metric lanyard_upstream_unauthorized_retries_total "$m")
in_flight=$(metric lanyard_proxy_in_flight_requests "$m")

stat() {
    sed -n "s/^stats_$1=//p" "$work/mock.out"
}
mock_token_requests=$(stat token_requests)
mock_issued_a=$(stat tokens_issued_a)
mock_issued_b=$(stat tokens_issued_b)
mock_refusals=$(stat token_refusals)
mock_api=$(stat api_requests)

log_problems=$(grep -cE '"level":"(WARN|ERROR)"' "$work/lanyard.log" || true)

rss_limit=$((rss_start + rss_slack_mib * 1024))
rate_done=$(awk -v n="$requests" -v us="$duration_us" 'BEGIN { printf "%.0f", us ? n / (us / 1e6) : 0 }')

# Sets $verdict from the arithmetic condition $1, and fails the run on FAIL.
check() {
    if (($1)); then
        verdict=PASS
    else
        verdict=FAIL
        failed_checks=1
    fi
}
check "failed == 0 && requests > 0"
failed_verdict=$verdict
if [[ -n $picked_ms ]]; then
    pickup="$(((picked_ms - rotated_ms) / 1000)).$((((picked_ms - rotated_ms) % 1000) / 100)) s"
    a_after="$a_after_rename after the rename, $a_after_pickup after the pickup"
    b_after="$b_after_pickup after the pickup"
else
    pickup="not within ${pickup_limit_s} s"
    a_after="$a_after_rename after the rename, no pickup"
    b_after="no pickup"
fi
check "${picked_ms:-0} > 0 && reload_success == 1 && a_after_pickup == 0 && b_after_pickup > 0"
rotation_verdict=$verdict
check "rss_end <= rss_limit"
rss_verdict=$verdict
check "lanyard_exit == 0"
exit_verdict=$verdict

row() {
    if [[ -n ${3-} ]]; then
        printf '%-34s %-44s %s\n' "$1" "$2" "$3"
    else
        printf '%-34s %s\n' "$1" "$2"
    fi
}
echo
echo "lanyard soak: ${duration} s, $connections connections, tokens of ${expires_in} s, rotation at ${rotate_at} s"
printf '%.0s-' {1..86}
echo
row "requests completed" "$requests ($rate_done req/s)"
row "failed requests" "$failed (non-2xx $non_2xx, socket errors $socket_errors)" "$failed_verdict"
row "  status codes seen" "$statuses"
row "  lanyard's count (/metrics)" "$proxy_total answered, $proxy_non_2xx non-2xx"
row "latency p50 / p99 / p99.9 / max" "$(latency 50) / $(latency 99) / $(latency 99.9) / $(latency max) ms"
row "token requests, lanyard /metrics" "$token_total ($token_success success)"
row "token requests, mock" "$mock_token_requests ($client_a $mock_issued_a, $client_b $mock_issued_b, refused $mock_refusals)"
row "credential reloads" "$reload_success success, $reload_other other"
row "rotation picked up after" "$pickup (limit ${pickup_limit_s} s)" "$rotation_verdict"
row "  answers naming $client_a" "$a_total ($a_after)"
row "  answers naming $client_b" "$b_total ($b_after)"
row "RSS after ${warmup} s warm-up" "$(mib "$rss_start")"
row "RSS at end" "$(mib "$rss_end") (max $(mib "$rss_max"), limit $(mib "$rss_limit"))" "$rss_verdict"
row "open files, start / end" "$fds_start / $fds_end"
row "upstream errors / 401 retries" "$upstream_errors / $retries_401"
row "in-flight gauge after the load" "$in_flight"
row "mock API requests" "$mock_api"
row "lanyard WARN/ERROR log lines" "$log_problems"
row "lanyard exit on SIGTERM" "$lanyard_exit" "$exit_verdict"
printf '%.0s-' {1..86}
echo
if ((token_total != mock_token_requests)); then
    echo "note: lanyard counted $token_total token requests, the mock $mock_token_requests"
fi
if ((log_problems)); then
    echo "lanyard's warnings and errors (first 5):"
    grep -E '"level":"(WARN|ERROR)"' "$work/lanyard.log" | head -n 5
fi
if ((failed_checks)); then
    echo "soak: FAILED"
    exit 1
fi
echo "soak: passed"
