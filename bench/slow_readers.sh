#!/usr/bin/env bash
# Benchmark: lanyard's memory under clients that read little or none of
# what it sends, each hostile shape measured on a release build: the
# verifier's under HTTP/2 streams behind a zero window, and the proxy's
# (`lanyard run`) under HTTP/2 and HTTP/1.1 clients that hold large
# answers, and a neighbour's latency beside slow readers. Run on demand;
# not part of `cargo test` or .ci/run.
#
#   bench/slow_readers.sh [options]
#
#   --scenarios "L"     which scenarios to run, by name, or `verifier` for
#                       a b c and `proxy` for the seven proxy-* (default
#                       "verifier proxy": all ten, about 9 minutes)
#   --binary PATH       the lanyard binary under test (default
#                       target/release/lanyard, built unless --no-build)
#   --baseline PATH     also run every scenario against another lanyard
#                       binary (say, one built from the commit before a
#                       change): a before/after in one run
#   --rss-limit-mib M   a child whose VmRSS passes this is killed, and
#                       its row says so (default 4096): a guard for the
#                       machine, since a verifier that copies each answer
#                       would need about 25 GiB in scenario b
#   --debug-example     build and run the example's debug build, which
#                       builds in a fraction of the time; lanyard itself
#                       is still the release binary
#   --no-build          use the binaries already built
#   --keep              keep the work directory (kept anyway on failure)
#
# How it measures: examples/slow_readers/, one process, starts the
# embedded mock as the token service and the release lanyard as a child
# against it on loopback, with the shipped defaults (only its listeners
# moved to free ports). Once the child is ready, "RSS before" is its
# VmRSS; the clients then come from loopback source addresses 127.0.0.10
# upward, so limits per client address apply as they would, and the
# child's /proc/PID/status is read every 100 ms from the first client on.
# "RSS peak" is the highest VmRSS read, or VmHWM if higher (VmHWM also
# covers the start). Each shape is held until every stream has its head
# or has ended (within 60 s), then for its hold.
#
# The verifier's scenarios: `lanyard verifier`, the mock also its service
# and wallet; a session started as the page does, the wallet presenting
# claims of 250 KiB, polled until verified; then HTTP/2 connections, each
# with 100 streams polling that verified status with a flow-control
# window of zero (the answers' heads arrive, never their bodies; PINGs are
# answered). "refused" counts streams reset before their head: with
# REFUSED_STREAM by h2, when a client opens more than the verifier's 8
# streams per connection before its SETTINGS arrive, or by lanyard, past
# the budget of HTTP/2 streams open (LANYARD_MAX_CONNECTIONS x
# LANYARD_MAX_HEADER_BYTES of headers and 4 KiB each); "reset" those
# answered and then reset within the hold (LANYARD_SEND_TIMEOUT, default
# 30 s, or their connection closed: h2 sends GOAWAY once a client has
# reset 20 streams it had not yet accepted, which the example's client
# does as it gives up on the heads it waits for beyond the 8). Counts vary
# from run to run with those races; the peak does not move much.
#   a   1 address x 32 connections x 100 streams (one client at its cap
#       of 32 connections: 3200 streams)
#   b   33 addresses x 32 connections x 100 streams (1056 connections,
#       past the default limit of 1024; 105600 streams)
#   c   a with LANYARD_SEND_TIMEOUT=5s, held 15 s: the answered streams
#       reset, and "RSS end" (the last sample) shows what was given back
#
# The proxy's scenarios: `lanyard run`, SERVICE_API_URL an HTTP/1.1
# upstream in the example's process whose answers are 256 KiB, one
# shared buffer (with a Content-Length at /large; chunked, no length, at
# /chunked), one request through it before "RSS before". 1,000 client
# connections (under LANYARD_MAX_CONNECTIONS, 1024) from 32 addresses,
# about 31 each. With LANYARD_MAX_UPSTREAM_CONNECTIONS (256) upstream
# connections, the answers beyond 256 wait for one and are answered 504
# at LANYARD_UPSTREAM_TIMEOUT (30 s): so each of these runs about 45 s.
#   proxy-h2          1,000 HTTP/2 connections x 100 GETs of /large, each
#                     stream granted a window of 0 (100,000 streams)
#   proxy-h2-chunked  the same of /chunked, each stream granted 1 byte of
#                     window and never more
#   proxy-h2-retry, proxy-h2-chunked-retry
#                     each of those two with every stream refused with
#                     REFUSED_STREAM sent again a second later, as a
#                     client may (RFC 9113 8.7), until its head arrives or
#                     60 s have passed; "refused" counts every refusal
#   proxy-h2-upload   1,000 HTTP/2 connections x 1 POST of a 1 MiB body to
#                     /sink, where the upstream reads nothing and never
#                     answers: each client sends what lanyard's windows
#                     let it, and those beyond the 256 upstream
#                     connections wait for one with their bodies unread
#   proxy-h1          1,000 HTTP/1.1 connections, one GET of /large each,
#                     each socket's receive buffer 4 KiB (SO_RCVBUF, as a
#                     client that means to hold the answer sets it); each
#                     reads its answer's head and nothing more
#   proxy-neighbour   3 HTTP/2 connections (3 addresses) x 100 GETs of
#                     /large, each stream reading slowly: a window of
#                     4 KiB given back 1 s after it arrives; beside them,
#                     a neighbour (127.0.0.9) of 4 keep-alive clients
#                     sending GETs of a 2-byte answer one after another,
#                     timed alone for 2 s first, then for 40 s beside the
#                     slow readers (its GETs under way then waited for)
#
# "KiB/unit" is (RSS peak - RSS before) over the streams the proxy took
# (neither refused nor lost with their connection), or, for proxy-h1,
# over the connections: what a stream or connection of that shape costs,
# against the charges of docs/proxy.md "Limits" (none for the -retry
# scenarios, whose streams are taken at one time and not at another).
#
# Prints a table per listener: scenario | binary | (connections |)
# streams answered | refused | reset (or reset/closed) | RSS before (MiB)
# | RSS peak (MiB) (| limit (MiB) | KiB/unit | neighbour alone p50/p99 ms
# | beside p50/p99 ms | 504s), then the rest of each run's results below.
# The limits are the manifests' (deploy/kubernetes/deployment.yaml for the
# proxy, deploy/kubernetes/verifier/deployment.yaml for the verifier):
# a peak above that is an OOM kill in production. Exit 1 when a run fails
# to set up (the example's message is shown); exit 2 on bad options.
# Memory over the limit does not fail the run: it is a measurement.
set -euo pipefail
prog=slow_readers
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
# --baseline's and --binary's paths are the caller's, before the cd.
caller_dir=$PWD
cd "$(dirname "$0")/.."

verifier_scenarios="a b c"
proxy_scenarios="proxy-h2 proxy-h2-retry proxy-h2-chunked proxy-h2-chunked-retry proxy-h2-upload proxy-h1 proxy-neighbour"
scenarios="verifier proxy"
rss_limit_mib=4096
lanyard_bin=
baseline_bin=
profile=release
build=1
keep=0

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

die_usage() {
    echo "$prog: $1" >&2
    echo "usage: bench/slow_readers.sh [--scenarios \"a proxy-h2 ...\"] [--binary PATH] [--baseline PATH] ... (--help)" >&2
    exit 2
}

# The executable file $2, given as option $1, as an absolute path.
binary_option() {
    [[ -n $2 ]] || die_usage "$1 needs the path of a lanyard binary"
    local path=$2
    [[ $path == /* ]] || path=$caller_dir/$path
    [[ -x $path && -f $path ]] || die_usage "$1 $2 is not an executable file"
    echo "$path"
}

while (($#)); do
    case $1 in
    --binary)
        lanyard_bin=$(binary_option "$1" "${2-}")
        shift 2
        ;;
    --baseline)
        baseline_bin=$(binary_option "$1" "${2-}")
        shift 2
        ;;
    --scenarios)
        scenarios=${2-}
        shift 2
        ;;
    --rss-limit-mib)
        number "$1" "${2-}"
        rss_limit_mib=$2
        shift 2
        ;;
    --debug-example) profile=debug && shift ;;
    --no-build) build=0 && shift ;;
    --keep) keep=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die_usage "unknown option $1" ;;
    esac
done
((rss_limit_mib > 0)) || die_usage "--rss-limit-mib must be above 0"

# The scenarios asked for, the groups expanded.
runs_asked=()
for scenario in $scenarios; do
    case $scenario in
    verifier) read -ra more <<<"$verifier_scenarios" && runs_asked+=("${more[@]}") ;;
    proxy) read -ra more <<<"$proxy_scenarios" && runs_asked+=("${more[@]}") ;;
    a | b | c | proxy-h2 | proxy-h2-retry | proxy-h2-chunked | proxy-h2-chunked-retry | proxy-h2-upload | proxy-h1 | proxy-neighbour) runs_asked+=("$scenario") ;;
    *) die_usage "--scenarios: no scenario '$scenario' (a b c $proxy_scenarios, verifier, proxy)" ;;
    esac
done
((${#runs_asked[@]})) || die_usage "--scenarios names none"

# Memory limit in MiB of the first container of manifest $1: the first
# `memory:` after its first `limits:`.
manifest_limit() {
    awk '/limits:/ { in_limits = 1 } in_limits && $1 == "memory:" { sub(/Mi$/, "", $2); print $2; exit }' "$1"
}
proxy_limit_mib=$(manifest_limit deploy/kubernetes/deployment.yaml)
verifier_limit_mib=$(manifest_limit deploy/kubernetes/verifier/deployment.yaml)

target=${CARGO_TARGET_DIR:-target}
example_bin=$target/$profile/examples/slow_readers
if ((build)); then
    if [[ -z $lanyard_bin ]]; then
        # The binary as it ships, built alone: built with the example, it
        # would get the example's test-support feature too (docs/tests.md).
        echo "$prog: cargo build --release --bin lanyard"
        cargo build --release --locked --quiet --bin lanyard
    fi
    echo "$prog: cargo build ($profile) --example slow_readers"
    if [[ $profile == release ]]; then
        cargo build --release --locked --quiet --example slow_readers
    else
        cargo build --locked --quiet --example slow_readers
    fi
fi
lanyard_bin=${lanyard_bin:-$target/release/lanyard}
for bin in "$lanyard_bin" "$example_bin"; do
    [[ -x $bin ]] || die_usage "$bin is missing (drop --no-build)"
done

# Scenario b's 1056 connections, and the proxy's 1,000 with an upstream
# connection each for the answers under way, are a descriptor each in the
# example and in lanyard (which raises its own soft limit to what it
# needs).
wanted_fds=8192
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
    local flood="--addresses 32 --connections 1000 --hold 10"
    case $1 in
    a) echo "--addresses 1 --connections 32 --streams 100 --hold 10" ;;
    b) echo "--addresses 33 --connections 1056 --streams 100 --hold 10" ;;
    c) echo "--addresses 1 --connections 32 --streams 100 --hold 15 --env LANYARD_SEND_TIMEOUT=5s" ;;
    proxy-h2) echo "--shape h2 $flood --streams 100 --window 0" ;;
    proxy-h2-retry) echo "--shape h2 $flood --streams 100 --window 0 --retry-refused" ;;
    proxy-h2-chunked) echo "--shape h2 $flood --streams 100 --chunked --window 1" ;;
    proxy-h2-chunked-retry) echo "--shape h2 $flood --streams 100 --chunked --window 1 --retry-refused" ;;
    proxy-h2-upload) echo "--shape h2 $flood --streams 1 --upload-kib 1024" ;;
    proxy-h1) echo "--shape h1 $flood --recv-buffer 4096" ;;
    proxy-neighbour)
        echo "--shape neighbour --addresses 3 --connections 3 --streams 100 --window 4096" \
            "--read-every 1000 --neighbours 4 --hold 40"
        ;;
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

# RSS peak of result file $1, saying so when the guard killed the child.
peak_cell() {
    local cell
    cell=$(mib_cell "$(field rss_peak_kib "$1")")
    [[ $(field child "$1") != killed_at_rss_limit ]] || cell="$cell (killed at the guard's $rss_limit_mib)"
    echo "$cell"
}

targets=(lanyard)
[[ -z $baseline_bin ]] || targets+=(baseline)
echo "$prog: lanyard $lanyard_bin${baseline_bin:+, baseline $baseline_bin}; example $example_bin"
runs=()
for scenario in "${runs_asked[@]}"; do
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

verifier_runs=()
proxy_runs=()
for run in "${runs[@]}"; do
    case $run in
    proxy-*) proxy_runs+=("$run") ;;
    *) verifier_runs+=("$run") ;;
    esac
done

if ((${#verifier_runs[@]})); then
    echo
    echo "The verifier. Scenario a: 1 address x 32 connections x 100 streams; b: 33"
    echo "addresses x 32 connections x 100 streams; c: a with LANYARD_SEND_TIMEOUT=5s,"
    echo "held 15 s. Claims of 250 KiB; the manifest's limit is $verifier_limit_mib MiB."
    echo
    row="| %-8s | %-8s | %16s | %7s | %5s | %16s | %14s |\n"
    # shellcheck disable=SC2059  # the format is ours
    printf "$row" scenario binary "streams answered" refused reset "RSS before (MiB)" "RSS peak (MiB)"
    echo "|----------|----------|------------------|---------|-------|------------------|----------------|"
    for run in "${verifier_runs[@]}"; do
        read -r scenario name <<<"$run"
        out=$work/$scenario-$name.out
        # shellcheck disable=SC2059
        printf "$row" "$scenario" "$name" "$(field streams_answered "$out")" \
            "$(field streams_refused "$out")" "$(field streams_reset_later "$out")" \
            "$(mib_cell "$(field rss_before_kib "$out")")" "$(peak_cell "$out")"
    done
fi

if ((${#proxy_runs[@]})); then
    echo
    echo "The proxy (lanyard run), answers of 256 KiB from a loopback upstream."
    echo "proxy-h2: 1,000 connections (32 addresses) x 100 streams, window 0;"
    echo "proxy-h2-chunked: the same, chunked answers, window 1 byte; -retry: refused"
    echo "streams sent again a second later, every refusal counted; proxy-h2-upload:"
    echo "1,000 connections x 1 POST of 1 MiB that the upstream never reads; proxy-h1:"
    echo "1,000 HTTP/1.1 connections, 4 KiB receive buffers, heads read only;"
    echo "proxy-neighbour: 3 connections x 100 slow streams (4 KiB a second each)"
    echo "beside a neighbour's GETs, timed alone and beside them (p50/p99 ms)."
    echo "KiB/unit: (peak - before) per stream taken, per connection for proxy-h1."
    echo
    row="| %-22s | %-8s | %11s | %16s | %7s | %12s | %16s | %14s | %11s | %8s | %15s | %16s | %4s |\n"
    # shellcheck disable=SC2059
    printf "$row" scenario binary connections "streams answered" refused "reset/closed" \
        "RSS before (MiB)" "RSS peak (MiB)" "limit (MiB)" "KiB/unit" "alone p50/p99" "beside p50/p99" 504s
    echo "|------------------------|----------|-------------|------------------|---------|--------------|------------------|----------------|-------------|----------|-----------------|------------------|------|"
    for run in "${proxy_runs[@]}"; do
        read -r scenario name <<<"$run"
        out=$work/$scenario-$name.out
        per_unit=$(field kib_per_stream "$out")
        [[ $per_unit != - ]] || per_unit=$(field kib_per_connection "$out")
        reset=$(field streams_reset_later "$out")
        closed=$(field streams_closed_later "$out")
        alone=- beside=- timeouts=-
        if [[ $scenario == proxy-neighbour ]]; then
            alone="$(field neighbour_alone_p50_ms "$out")/$(field neighbour_alone_p99_ms "$out")"
            beside="$(field neighbour_beside_p50_ms "$out")/$(field neighbour_beside_p99_ms "$out")"
            timeouts=$(field neighbour_beside_504 "$out")
        fi
        # shellcheck disable=SC2059
        printf "$row" "$scenario" "$name" "$(field connections_opened "$out")" \
            "$(field streams_answered "$out")" "$(field streams_refused "$out")" "$reset/$closed" \
            "$(mib_cell "$(field rss_before_kib "$out")")" "$(peak_cell "$out")" \
            "$proxy_limit_mib" "$per_unit" "$alone" "$beside" "$timeouts"
    done
fi

echo
echo "Each run's other results: the answers' statuses, streams lost (ended with"
echo "their connection before a head), closed later (their connection ended"
echo "after the head), read to the end, with no head within 60 s, RSS at the"
echo "hold's end, the machine's TCP buffers at their highest (/proc/net/sockstat:"
echo "lanyard's sockets and its peers', out of every RSS but charged by a cgroup v2"
echo "limit to each socket's owner), the reset codes of refused streams, the answer's size, the"
echo "bytes read, and how the child ended; for proxy-neighbour, its requests."
for run in "${runs[@]}"; do
    read -r scenario name <<<"$run"
    out=$work/$scenario-$name.out
    printf "  %s %s statuses=%s lost=%s closed_later=%s completed=%s unresolved=%s connections_closed=%s rss_end=%s MiB tcp_mem_peak=%s MiB refused_reasons=%s answer_bytes=%s body_bytes=%s child=%s\n" \
        "$scenario" "$name" "$(field statuses "$out")" "$(field streams_lost "$out")" \
        "$(field streams_closed_later "$out")" "$(field streams_completed "$out")" \
        "$(field streams_unresolved "$out")" "$(field connections_closed "$out")" \
        "$(mib_cell "$(field rss_end_kib "$out")")" "$(mib_cell "$(field tcp_mem_peak_kib "$out")")" \
        "$(field refused_reasons "$out")" \
        "$(field answer_bytes "$out")" "$(field body_bytes "$out")" "$(field child "$out")"
    if [[ $scenario == proxy-neighbour ]]; then
        for phase in alone beside; do
            printf "    neighbour %s: requests=%s 200=%s 504=%s failed=%s p50=%s ms p99=%s ms max=%s ms\n" \
                "$phase" "$(field "neighbour_${phase}_requests" "$out")" \
                "$(field "neighbour_${phase}_200" "$out")" "$(field "neighbour_${phase}_504" "$out")" \
                "$(field "neighbour_${phase}_failed" "$out")" "$(field "neighbour_${phase}_p50_ms" "$out")" \
                "$(field "neighbour_${phase}_p99_ms" "$out")" "$(field "neighbour_${phase}_max_ms" "$out")"
        done
    fi
done

echo
for run in "${runs[@]}"; do
    read -r scenario name <<<"$run"
    [[ $name == lanyard ]] || continue
    limit=$verifier_limit_mib
    [[ $scenario != proxy-* ]] || limit=$proxy_limit_mib
    peak=$(field rss_peak_kib "$work/$scenario-$name.out")
    if [[ $(field child "$work/$scenario-$name.out") == killed_at_rss_limit ]] && ((rss_limit_mib < limit)); then
        echo "scenario $scenario: lanyard was killed at the guard's $rss_limit_mib MiB, under the manifest's $limit MiB: its peak is not known"
    elif [[ $peak =~ ^[0-9]+$ ]] && ((peak < limit * 1024)); then
        echo "scenario $scenario: lanyard's peak is under the manifest's $limit MiB"
    else
        echo "scenario $scenario: lanyard's peak is NOT under the manifest's $limit MiB"
    fi
done
((!failed)) || exit 1
