#!/usr/bin/env bash
# Benchmark: the verifier's memory while HTTP/2 clients hold its answers
# behind a zero flow-control window. Run on demand; not part of `cargo
# test` or .ci/run.
#
#   bench/slow_readers.sh [options]
#
#   --baseline PATH     also run every scenario against another lanyard
#                       binary (say, one built from the commit before a
#                       change): a before/after in one run
#   --scenarios "L"     which scenarios to run (default "a b c")
#   --rss-limit-mib M   a child whose VmRSS passes this is killed, and
#                       its row says so (default 4096): a guard for the
#                       machine, since a verifier that copies each answer
#                       would need about 25 GiB in scenario b
#   --no-build          use the binaries already in target/release
#   --keep              keep the work directory (kept anyway on failure)
#
# How it measures: examples/slow_readers.rs, one process, starts the
# embedded mock and `lanyard verifier` (the release binary, as a child)
# against it on loopback, starts a session as the page does, has the
# mock's wallet present claims of 250 KiB, and polls until verified; the
# child's VmRSS then is "RSS before". It then opens HTTP/2 connections
# from loopback source addresses 127.0.0.10 upward, each with 100 streams
# polling that verified status with a flow-control window of zero (the
# answers' heads arrive, never their bodies; PINGs are answered), waits
# until every stream has its head or was reset, and reads the child's
# /proc/PID/status every 100 ms for the hold. "RSS peak" is the highest
# VmRSS read from the first stream on, or VmHWM if higher (VmHWM also
# covers the start). "refused" counts streams reset before their head:
# with REFUSED_STREAM by h2, when a client opens more than the verifier's
# 8 streams per connection before its SETTINGS arrive, or by lanyard, past
# the budget of HTTP/2 streams open (LANYARD_MAX_CONNECTIONS x
# LANYARD_MAX_HEADER_BYTES of headers and 4 KiB each); "reset" those
# answered and then reset within the hold (LANYARD_SEND_TIMEOUT, default
# 30 s, or their connection closed: h2 sends GOAWAY once a client has
# reset 20 streams it had not yet accepted, which the example's client
# does as it gives up on the heads it waits for beyond the 8). Counts vary
# from run to run with those races; the peak does not move much.
#
# The shipped manifest (deploy/kubernetes/verifier/deployment.yaml) limits
# the verifier's container to 320 MiB: a peak above that is an OOM kill in
# production.
#
# Scenarios:
#   a   1 address x 32 connections x 100 streams (one client at its cap
#       of 32 connections: 3200 streams)
#   b   33 addresses x 32 connections x 100 streams (1056 connections,
#       past the default limit of 1024; 105600 streams)
#   c   a with LANYARD_SEND_TIMEOUT=5s, held 15 s: the answered streams
#       reset, and "RSS end" (the last sample) shows what was given back
#
# Prints a table: scenario | binary | streams answered | refused | reset |
# RSS before (MiB) | RSS peak (MiB), and the rest of each run's results
# (streams lost with their connection, RSS at the end, how the child
# ended) below it. Exit 1 when a run fails to set up (the example's
# message is shown); exit 2 on bad options. Memory over the limit does not
# fail the run: it is a measurement.
set -euo pipefail
prog=slow_readers
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
# --baseline's path is the caller's, before the cd.
caller_dir=$PWD
cd "$(dirname "$0")/.."

# The manifest's memory limit, in MiB.
manifest_limit_mib=320
scenarios="a b c"
rss_limit_mib=4096
baseline_bin=
build=1
keep=0

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

die_usage() {
    echo "$prog: $1" >&2
    echo "usage: bench/slow_readers.sh [--baseline PATH] [--scenarios \"a b c\"] ... (--help)" >&2
    exit 2
}

while (($#)); do
    case $1 in
    --baseline)
        [[ -n ${2-} ]] || die_usage "--baseline needs the path of a lanyard binary"
        baseline_bin=$2
        [[ $baseline_bin == /* ]] || baseline_bin=$caller_dir/$baseline_bin
        [[ -x $baseline_bin && -f $baseline_bin ]] || die_usage "--baseline $2 is not an executable file"
        shift 2
        ;;
    --scenarios)
        [[ ${2-} =~ ^[abc\ ]+$ ]] || die_usage "--scenarios takes a, b and c separated by spaces, got '${2-}'"
        scenarios=$2
        shift 2
        ;;
    --rss-limit-mib)
        number "$1" "${2-}"
        rss_limit_mib=$2
        shift 2
        ;;
    --no-build) build=0 && shift ;;
    --keep) keep=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die_usage "unknown option $1" ;;
    esac
done
((rss_limit_mib > 0)) || die_usage "--rss-limit-mib must be above 0"

target=${CARGO_TARGET_DIR:-target}
lanyard_bin=$target/release/lanyard
example_bin=$target/release/examples/slow_readers
if ((build)); then
    # The binary as it ships, built alone: built with the example, it
    # would get the example's test-support feature too (docs/tests.md).
    echo "$prog: cargo build --release --bin lanyard, then --example slow_readers"
    cargo build --release --locked --quiet --bin lanyard
    cargo build --release --locked --quiet --example slow_readers
fi
for bin in "$lanyard_bin" "$example_bin"; do
    [[ -x $bin ]] || die_usage "$bin is missing (drop --no-build)"
done

# Scenario b's 1056 connections are a descriptor each in the example and
# in the verifier (which raises its own soft limit to what it needs).
wanted_fds=4096
if (($(ulimit -Sn) < wanted_fds)); then
    hard=$(ulimit -Hn)
    if [[ $hard != unlimited ]] && ((hard < wanted_fds)); then
        wanted_fds=$hard
    fi
    ulimit -Sn "$wanted_fds"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-slow-readers.XXXXXX")
failed=0
cleanup() {
    if ((keep || failed)); then
        echo "$prog: work directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'failed=1; exit 1' INT TERM

# The example's options for scenario $1.
scenario_args() {
    case $1 in
    a) echo "--addresses 1 --connections 32 --streams 100 --hold 10" ;;
    b) echo "--addresses 33 --connections 1056 --streams 100 --hold 10" ;;
    c) echo "--addresses 1 --connections 32 --streams 100 --hold 15 --env LANYARD_SEND_TIMEOUT=5s" ;;
    esac
}

# Field $1 of the result line in file $2 ("-" when absent).
field() {
    awk -v key="$1" '{
        for (i = 1; i <= NF; i++) {
            n = index($i, "=")
            if (substr($i, 1, n - 1) == key) { print substr($i, n + 1); found = 1 }
        }
    } END { if (!found) print "-" }' "$2"
}

mib_cell() { # KiB $1 as MiB for a table cell, or - when absent
    [[ $1 =~ ^[0-9]+$ ]] && awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }' || echo "-"
}

targets=(lanyard)
[[ -z $baseline_bin ]] || targets+=(baseline)
runs=()
for scenario in $scenarios; do
    for name in "${targets[@]}"; do
        bin=$lanyard_bin
        [[ $name == lanyard ]] || bin=$baseline_bin
        out=$work/$scenario-$name.out
        read -ra options <<<"$(scenario_args "$scenario")"
        echo "$prog: scenario $scenario, $name: ${options[*]}"
        if "$example_bin" --lanyard "$bin" --rss-limit-mib "$rss_limit_mib" "${options[@]}" \
            >"$out" 2>"$work/$scenario-$name.err"; then
            runs+=("$scenario $name")
        else
            failed=1
            echo "$prog: scenario $scenario, $name failed:" >&2
            tail -n 20 "$work/$scenario-$name.err" >&2
        fi
    done
done

echo
echo "Scenario a: 1 address x 32 connections x 100 streams; b: 33 addresses x 32"
echo "connections x 100 streams; c: a with LANYARD_SEND_TIMEOUT=5s, held 15 s."
echo "Claims of 250 KiB; the manifest's limit is $manifest_limit_mib MiB."
echo
row="| %-8s | %-8s | %16s | %7s | %5s | %16s | %14s |\n"
# shellcheck disable=SC2059  # the format is ours
printf "$row" scenario binary "streams answered" refused reset "RSS before (MiB)" "RSS peak (MiB)"
echo "|----------|----------|------------------|---------|-------|------------------|----------------|"
for run in "${runs[@]}"; do
    read -r scenario name <<<"$run"
    out=$work/$scenario-$name.out
    # shellcheck disable=SC2059
    printf "$row" "$scenario" "$name" "$(field streams_answered "$out")" \
        "$(field streams_refused "$out")" "$(field streams_reset_later "$out")" \
        "$(mib_cell "$(field rss_before_kib "$out")")" "$(mib_cell "$(field rss_peak_kib "$out")")"
done

echo
echo "Each run's other results: streams lost (ended with their connection"
echo "before a head) and closed later (their connection ended after the head),"
echo "streams with no head within 60 s, RSS at the hold's end, the reset codes"
echo "of refused streams, the answer's size, and how the child ended."
for run in "${runs[@]}"; do
    read -r scenario name <<<"$run"
    out=$work/$scenario-$name.out
    printf "  %s %-8s lost=%s closed_later=%s unresolved=%s connections_closed=%s rss_end=%s MiB refused_reasons=%s answer_bytes=%s body_bytes=%s child=%s\n" \
        "$scenario" "$name" "$(field streams_lost "$out")" "$(field streams_closed_later "$out")" \
        "$(field streams_unresolved "$out")" "$(field connections_closed "$out")" \
        "$(mib_cell "$(field rss_end_kib "$out")")" "$(field refused_reasons "$out")" \
        "$(field answer_bytes "$out")" "$(field body_bytes "$out")" "$(field child "$out")"
done

echo
for run in "${runs[@]}"; do
    read -r scenario name <<<"$run"
    [[ $name == lanyard ]] || continue
    peak=$(field rss_peak_kib "$work/$scenario-$name.out")
    if [[ $peak =~ ^[0-9]+$ ]] && ((peak < manifest_limit_mib * 1024)); then
        echo "scenario $scenario: lanyard's peak is under the manifest's $manifest_limit_mib MiB"
    else
        echo "scenario $scenario: lanyard's peak is NOT under the manifest's $manifest_limit_mib MiB"
    fi
done
((!failed)) || exit 1
