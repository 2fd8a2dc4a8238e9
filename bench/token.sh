#!/usr/bin/env bash
# What a key in PKCS#11 costs: the account's key as a PEM and
# the same key imported into SoftHSM2, run alternately against the mock
# service (examples/mock_service.rs), measured two ways:
#   - the token request as lanyard times it (assertion signed, then
#     exchanged: `lanyard_token_request_duration_seconds` of a `lanyard run`
#     after its first token), which is what each renewal costs;
#   - `lanyard token` from start to exit: the key read (PEM) or the module
#     loaded and the token logged in (PKCS#11), one signature, the request.
# Not part of `cargo test` or .ci/run.
#
#   bench/token.sh [--runs N] [--no-build]
#
#   --runs N      invocations of each (default 30)
#   --no-build    use the binaries already in target/release
#
# Everything listens on 127.0.0.1. Needs softhsm2 (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
prog=bench
die_usage() {
    echo "$prog: $*" >&2
    exit 2
}
# shellcheck source=bench/lib.sh
source bench/lib.sh

runs=30
build=1
while (($#)); do
    case $1 in
    --runs)
        number "$1" "${2-}"
        runs=$2
        shift 2
        ;;
    --no-build)
        build=0
        shift
        ;;
    *) die_usage "unknown option $1 (see the comment at the top of bench/token.sh)" ;;
    esac
done

install_missing softhsm2-util:softhsm2
release_binaries
work=$(mktemp -d)
mock=""
cleanup() {
    [[ -n $mock ]] && kill "$mock" 2>/dev/null && wait "$mock" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

"$mock_bin" "$work" --expires-in 3600 >"$work/mock.out" 2>"$work/mock.err" &
mock=$!
wait_for_line '^ready=1' 10 "$work/mock.out" || die_usage "the mock did not start: $(cat "$work/mock.err")"

pin=bench-pin
mkdir -p "$work/tokens"
export SOFTHSM2_CONF=$work/softhsm2.conf
printf 'directories.tokendir = %s/tokens\nobjectstore.backend = file\n' "$work" >"$SOFTHSM2_CONF"
printf '%s\n' "$pin" >"$work/pin"
python3 - "$work/credentials-a.json" "$work/key.pem" "$work/credentials-nokey.json" <<'PY'
import json, sys
credentials = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(credentials["private_key"])
del credentials["private_key"]
json.dump(credentials, open(sys.argv[3], "w"))
PY
softhsm2-util --init-token --free --label bench --pin "$pin" --so-pin 5678 >/dev/null
softhsm2-util --import "$work/key.pem" --token bench --label sa-key --id 01 --pin "$pin" >/dev/null
uri="pkcs11:token=bench;object=sa-key?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:$work/pin"

echo "$prog: $runs runs of lanyard token with each key, alternating"
api_url=$(sed -n 's/^api_url=//p' "$work/mock.out")
python3 - "$lanyard_bin" "$runs" "$work" "$uri" "$api_url" <<'PY'
import json, os, statistics, subprocess, sys, time, urllib.request

lanyard, runs, work, uri, api_url = sys.argv[1:6]
runs = int(runs)
base = {"PATH": os.environ["PATH"], "SOFTHSM2_CONF": os.environ["SOFTHSM2_CONF"]}
kinds = {
    "PEM key": {**base, "SA_CREDENTIALS_FILE": f"{work}/credentials-a.json"},
    "SoftHSM2 (PKCS#11)": {**base, "SA_CREDENTIALS_FILE": f"{work}/credentials-nokey.json",
                           "SA_PRIVATE_KEY": uri},
}


def token_command(env):
    started = time.perf_counter()
    done = subprocess.run([lanyard, "token"], env=env, capture_output=True)
    if done.returncode != 0 or not done.stdout.strip():
        sys.exit(f"bench: lanyard token failed: {done.stderr.decode()}")
    return (time.perf_counter() - started) * 1000


def token_request(env):
    """The first token request of a `lanyard run`, as its metrics time it."""
    env = {**env, "SERVICE_API_URL": api_url, "LANYARD_LISTEN": "127.0.0.1:0",
           "LANYARD_ADMIN_LISTEN": "127.0.0.1:0", "LANYARD_LOG_FORMAT": "json"}
    child = subprocess.Popen([lanyard, "run"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        admin = None
        for line in child.stderr:
            fields = json.loads(line).get("fields", {})
            if fields.get("message") == "lanyard started":
                admin = fields["admin"]
                break
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://{admin}/readyz", timeout=2)
                break
            except OSError:
                time.sleep(0.01)
        metrics = urllib.request.urlopen(f"http://{admin}/metrics", timeout=2).read().decode()
        for line in metrics.splitlines():
            if line.startswith("lanyard_token_request_duration_seconds_sum"):
                return float(line.split()[-1]) * 1000
        sys.exit("bench: no lanyard_token_request_duration_seconds in /metrics")
    finally:
        child.terminate()
        child.wait()


table = {}
for name, measure in (("token request (lanyard run)", token_request),
                      ("lanyard token, start to exit", token_command)):
    times = {kind: [] for kind in kinds}
    for n in range(runs):
        for kind in (list(kinds) if n % 2 == 0 else list(reversed(kinds))):
            times[kind].append(measure(kinds[kind]))
    table[name] = times

print("-" * 78)
print(f"What a key in PKCS#11 costs: {runs} runs each, alternating (ms)")
print(f"{'measure':<30}{'key':<22}{'median':>8}{'p90':>8}{'min':>8}{'max':>8}")
for name, times in table.items():
    for kind, ms in times.items():
        ms.sort()
        p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
        print(f"{name:<30}{kind:<22}{statistics.median(ms):>8.2f}{p90:>8.2f}{ms[0]:>8.2f}{ms[-1]:>8.2f}")
print("-" * 78)
PY
