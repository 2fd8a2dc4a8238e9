# shellcheck shell=bash disable=SC2154  # prog: set by the sourcing script
# Shell helpers shared by the scripts in bench/. The sourcing
# script sets `prog` (its name in messages) and defines `die_usage`.

# apt_install, shared with scripts/test and .ci/run.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

# Option $1's value $2 must be a whole number.
number() {
    [[ ${2-} =~ ^[0-9]+$ ]] || die_usage "$1 needs a whole number, got '${2-}'"
}

# Milliseconds since the epoch, from bash's own clock.
now_ms() {
    local us=${EPOCHREALTIME/[.,]/}
    echo $((us / 1000))
}

# Waits up to $2 seconds for the regular expression $1 in file $3.
wait_for_line() {
    local deadline=$(($(now_ms) + $2 * 1000))
    until grep -qE "$1" "$3" 2>/dev/null; do
        (($(now_ms) < deadline)) || return 1
        sleep 0.05
    done
}

# Installs what is missing of the tools given as command:package.
install_missing() {
    local tool missing=()
    for tool in "$@"; do
        command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
    done
    if ((${#missing[@]})); then
        echo "$prog: installing ${missing[*]}"
        apt_install "${missing[@]}"
    fi
}

# Sets lanyard_bin and mock_bin to the release binaries, building them
# first unless $build is 0; exits 2 through die_usage when one is missing.
release_binaries() {
    local target=${CARGO_TARGET_DIR:-target} bin
    lanyard_bin=$target/release/lanyard
    mock_bin=$target/release/examples/mock_service
    if ((build)); then
        # The binary as it ships, built alone: built with the example, it
        # would get the example's test-support feature too (docs/tests.md).
        echo "$prog: cargo build --release --bin lanyard, then --example mock_service"
        cargo build --release --locked --bin lanyard
        cargo build --release --locked --example mock_service
    fi
    for bin in "$lanyard_bin" "$mock_bin"; do
        [[ -x $bin ]] || die_usage "$bin is missing (drop --no-build)"
    done
}


# nginx lives in /usr/sbin, which a normal user's PATH may lack.
find_nginx() {
    command -v nginx 2>/dev/null || { [[ -x /usr/sbin/nginx ]] && echo /usr/sbin/nginx; } || true
}

# Says why the run stops, with the last lines of each log in $work named
# by the sourcing script's `fatal_logs`, and exits 1 (its cleanup keeps
# $work, since `failed` is set).
fatal() {
    echo "$prog: FATAL: $1" >&2
    # shellcheck disable=SC2034  # read by the sourcing script's cleanup
    failed=1
    local log
    for log in "${fatal_logs[@]}"; do
        if [[ -s $work/$log ]]; then
            echo "--- last lines of $log" >&2
            tail -n 5 "$work/$log" >&2
        fi
    done
    exit 1
}

# Waits up to $2 seconds (default 10) for URL $1 to answer 200.
wait_for_200() {
    local deadline=$(($(now_ms) + ${2:-10} * 1000))
    until curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null; do
        (($(now_ms) < deadline)) || return 1
        sleep 0.05
    done
}

# Field $2 of /proc/$1/status in KiB (VmRSS, VmHWM); 0 once it is gone.
status_kib() {
    awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}

mib() {
    awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'
}

# User plus system CPU time of processes $@, in clock ticks.
cpu_ticks() {
    local pid total=0 stat fields
    for pid in "$@"; do
        stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
        # Fields after the command name, which may hold spaces.
        read -ra fields <<<"${stat##*) }"
        total=$((total + fields[11] + fields[12]))
    done
    echo "$total"
}

# Sum of the samples of metric $1 in the scrape $2 whose labels match the
# regular expression $3 (default: all), as a whole number: every metric
# the scripts sum counts something.
metric() {
    awk -v name="$1" -v want="${3:-.}" '
        $1 ~ "^" name "([{]|$)" && $1 ~ want { sum += $2 }
        END { printf "%d\n", sum }
    ' "$2"
}

# The median of the numbers on stdin.
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) print "nan"
        else if (NR % 2) print v[(NR + 1) / 2]
        else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
