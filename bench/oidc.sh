#!/usr/bin/env bash
# Benchmark: OpenID Connect logins through one verifier replica, and what
# each step of one costs, against a poll of a session that has ended (the
# page's steady state). Run on demand; not part of `cargo test` or .ci/run.
#
#   bench/oidc.sh [options]
#
#   --concurrency "L"   the concurrencies, one run each (default "1 16")
#   --logins N          logins in each step's batch (default 2000, at
#                       most 2000)
#   --rounds R          batches per step (default 3)
#   --duration S        seconds of whole logins, measured (default 10)
#   --warmup S          seconds of whole logins before the steps,
#                       discarded (default 2)
#   --no-build          use the binaries already in target/release
#   --keep              keep the work directory (kept anyway on failure)
#
# What runs, on 127.0.0.1 only: for each concurrency, a fresh release
# `DEMO_MOCK=true lanyard verifier` (the embedded mock is the service and
# the wallet) as a child of examples/oidc_bench.rs, one process, which
# drives it. Its provider is configured as a deployment's is, not as the
# demo's: LANYARD_OIDC_ISSUER is http://127.0.0.1:PORT (a free port, the
# one it listens on), LANYARD_OIDC_CLIENTS_FILE names one client made here
# (a random secret, a redirect URI http://127.0.0.1:1/cb that is never
# fetched), LANYARD_OIDC_SIGNING_KEY_FILE an RSA 2048 key made here with
# openssl. The start limits are raised out of the way, each to
# 1000000/1s: LANYARD_VERIFIER_CLIENT_STARTS, LANYARD_VERIFIER_STARTS and
# LANYARD_VERIFIER_SERVICE_CALLS (defaults 10/1m, 50/5s and 40/2s, which
# would measure the limits). Everything else is the default, logging
# included (a JSON line per session started and ended).
#
# The example's workers (one per concurrency, each a keep-alive HTTP/1.1
# client from its own loopback address) log in as a browser and a
# relying party's backend do. Each step runs alone over a batch of
# --logins logins: the authorization page (its request sealed),
# /api/start (a new browser: a cookie too), the wallet's present (the
# mock's, reported apart: not lanyard's cost), the /api/status poll that
# asks the service, ends the session and seals a code, the token request
# (client_secret_basic; an RS256 signature), and /api/status of the ended
# session again; then /api/start and the steady-state poll of sessions
# the plain page starts, for comparison. --rounds batches, each step's
# figures over all of them. Then whole logins for --duration seconds: logins/s, and
# each login's latency as the sum of lanyard's four requests (the
# wallet's present excluded from the latency, included in the wall time).
#
# Prints a table: step | concurrency | requests | req/s | p50 ms | p99 ms
# | verifier CPU µs/req (the verifier's own thread, where every request
# is served) | process CPU µs/req (the whole child, the mock's side of the
# service calls included), and for each concurrency a login's cost in
# plain polls. Exit 1 when a run fails to set up (the example's message is
# shown) or any request failed; exit 2 on bad options.
set -euo pipefail
prog=oidc
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

concurrency="1 16"
logins=2000
rounds=3
duration=10
warmup=2
build=1
keep=0
# Out of the way of a benchmark: the most a rate setting takes.
unlimited=1000000/1s

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

die_usage() {
    echo "$prog: $1" >&2
    echo "usage: bench/oidc.sh [--concurrency \"1 16\"] [--logins N] [--duration S] ... (--help)" >&2
    exit 2
}

while (($#)); do
    case $1 in
    --concurrency)
        [[ ${2-} =~ ^[0-9\ ]+$ ]] || die_usage "--concurrency needs whole numbers separated by spaces, got '${2-}'"
        concurrency=$2
        shift 2
        ;;
    --logins | --rounds | --duration | --warmup)
        number "$1" "${2-}"
        case $1 in
        --logins) logins=$2 ;;
        --rounds) rounds=$2 ;;
        --duration) duration=$2 ;;
        --warmup) warmup=$2 ;;
        esac
        shift 2
        ;;
    --no-build) build=0 && shift ;;
    --keep) keep=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die_usage "unknown option $1" ;;
    esac
done
((logins > 0 && logins <= 2000)) || die_usage "--logins must be 1 to 2000"
((rounds > 0 && duration > 0)) || die_usage "--rounds and --duration must be above 0"
read -ra levels <<<"$concurrency"
((${#levels[@]})) || die_usage "--concurrency needs at least one concurrency"
for c in "${levels[@]}"; do
    ((c > 0 && c <= 200)) || die_usage "a concurrency must be 1 to 200, got $c"
done

install_missing openssl:openssl awk:gawk

target=${CARGO_TARGET_DIR:-target}
lanyard_bin=$target/release/lanyard
example_bin=$target/release/examples/oidc_bench
if ((build)); then
    # The binary as it ships, built alone: built with the example, it
    # would get the example's test-support feature too (docs/tests.md).
    echo "$prog: cargo build --release --bin lanyard, then --example oidc_bench"
    cargo build --release --locked --quiet --bin lanyard
    cargo build --release --locked --quiet --example oidc_bench
fi
for bin in "$lanyard_bin" "$example_bin"; do
    [[ -x $bin ]] || die_usage "$bin is missing (drop --no-build)"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-oidc.XXXXXX")
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

# The provider's key and its one client, as an operator makes them
# (docs/oidc.md).
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/oidc-key.pem" 2>/dev/null
secret=$(openssl rand -hex 24)
cat >"$work/clients.json" <<EOF
{"clients": [{"client_id": "bench", "client_secret": "$secret", "client_name": "oidc bench",
  "redirect_uris": ["http://127.0.0.1:1/cb"]}]}
EOF
chmod 600 "$work/oidc-key.pem" "$work/clients.json"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
ran=()
for c in "${levels[@]}"; do
    echo "$prog: concurrency $c: ${warmup} s warm-up, $rounds x $logins logins a step, ${duration} s of whole logins"
    if "$example_bin" --lanyard "$lanyard_bin" --clients-file "$work/clients.json" \
        --signing-key-file "$work/oidc-key.pem" --concurrency "$c" --logins "$logins" --rounds "$rounds" \
        --duration "$duration" --warmup "$warmup" \
        --env "LANYARD_VERIFIER_CLIENT_STARTS=$unlimited" \
        --env "LANYARD_VERIFIER_STARTS=$unlimited" \
        --env "LANYARD_VERIFIER_SERVICE_CALLS=$unlimited" \
        >"$work/c$c.out" 2>"$work/c$c.err"; then
        ran+=("$c")
    else
        failed=1
        echo "$prog: concurrency $c failed:" >&2
        tail -n 20 "$work/c$c.err" >&2
    fi
    # The first failure of each step, if any.
    [[ ! -s $work/c$c.err ]] || sed 's/^/  /' "$work/c$c.err" | head -n 10
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# Field $1 of the line of step $2 in file $3 ("-" when absent).
field() {
    awk -v key="$1" -v step="$2" '$1 == "step=" step {
        for (i = 1; i <= NF; i++) {
            n = index($i, "=")
            if (substr($i, 1, n - 1) == key) { print substr($i, n + 1); found = 1 }
        }
    } END { if (!found) print "-" }' "$3"
}

label() {
    case $1 in
    authorize) echo "GET /authorize (the page, its request sealed)" ;;
    start) echo "POST /api/start (the login's session)" ;;
    start_plain) echo "POST /api/start (a plain page session)" ;;
    present) echo "the wallet's present (the mock's; not lanyard's)" ;;
    status_ending) echo "GET /api/status that ends it (service asked, code sealed)" ;;
    token) echo "POST /token (client_secret_basic, RS256 ID token)" ;;
    status_ended) echo "GET /api/status, ended (the login's, again)" ;;
    status_ended_plain) echo "GET /api/status, ended (a plain page session)" ;;
    login) echo "whole login, end to end (latency: lanyard's 4 requests)" ;;
    esac
}

steps="authorize start present status_ending token status_ended start_plain status_ended_plain login"
echo
row="| %-58s | %4s | %8s | %8s | %7s | %7s | %8s | %8s |\n"
# shellcheck disable=SC2059  # the format is ours
printf "$row" step conc requests "req/s" "p50 ms" "p99 ms" "verif µs" "proc µs"
# Markdown's separator, the numbers aligned right.
printf "| %s | %s |\n" "$(printf -- '-%.0s' {1..58})" \
    "$(printf -- '---: | %.0s' 1 2 3 4 5 6)---:"
for c in "${ran[@]}"; do
    out=$work/c$c.out
    for step in $steps; do
        # shellcheck disable=SC2059
        printf "$row" "$(label "$step")" "$c" "$(field requests "$step" "$out")" \
            "$(field per_second "$step" "$out")" "$(field p50_ms "$step" "$out")" \
            "$(field p99_ms "$step" "$out")" "$(field verifier_cpu_us "$step" "$out")" \
            "$(field process_cpu_us "$step" "$out")"
    done
done

echo
echo "verif µs: CPU per request of the verifier's thread, which serves every"
echo "request of the verifier; proc µs: of every thread of the child, the embedded"
echo "mock's side of the service calls included (both from /proc schedstat). Each"
echo "step ran alone over $rounds batches of $logins; req/s is their requests over"
echo "their wall time."
echo "Start limits raised for the run: LANYARD_VERIFIER_CLIENT_STARTS,"
echo "LANYARD_VERIFIER_STARTS and LANYARD_VERIFIER_SERVICE_CALLS=$unlimited."
echo "The wallet's present is timed apart and left out of the login's latency"
echo "and its CPU on the verifier's thread; it is in the logins' wall time."
echo "Load average $load_before before, $load_after after; $(nproc) CPUs."
for c in "${ran[@]}"; do
    out=$work/c$c.out
    awk -v c="$c" '
        function get(key,    i, n) {
            for (i = 1; i <= NF; i++) {
                n = index($i, "=")
                if (substr($i, 1, n - 1) == key) return substr($i, n + 1)
            }
        }
        { step = get("step"); cpu[step] = get("verifier_cpu_us"); failed += get("failed") }
        step == "login" { rate = get("per_second"); driver = get("driver_cpu_us") }
        END {
            steps = cpu["authorize"] + cpu["start"] + cpu["status_ending"] + cpu["token"]
            polls = cpu["status_ended_plain"] > 0 ? steps / cpu["status_ended_plain"] : 0
            printf "concurrency %s: %s logins/s; a login costs the verifier'"'"'s thread %.0f µs by its steps (%.0f in whole logins), %.0f plain ended polls (%.1f µs each); this driver %s µs a login; failed requests %d\n",
                c, rate, steps, cpu["login"], polls, cpu["status_ended_plain"], driver, failed
        }' "$out"
    if awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^failed=[1-9]/) bad = 1 } END { exit !bad }' "$out"; then
        failed=1
    fi
done
((!failed)) || exit 1
