# shellcheck shell=bash disable=SC2154  # prog: set by the sourcing script
# Shell helpers shared by bench/run.sh, bench/soak.sh and bench/fleet.sh. The sourcing
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
