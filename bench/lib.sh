# shellcheck shell=bash disable=SC2154  # prog: set by the sourcing script
# Shell helpers shared by bench/run.sh and bench/soak.sh. The sourcing
# script sets `prog` (its name in messages) and defines `die_usage`.

# As .ci/run does: install what the machine lacks from Debian; through sudo
# when not root.
apt_install() {
    local sudo=()
    if ((EUID != 0)); then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "$prog: missing $*; install it (Debian: apt-get install $*)" >&2
            exit 2
        fi
        sudo=(sudo DEBIAN_FRONTEND=noninteractive)
    fi
    export DEBIAN_FRONTEND=noninteractive
    if [[ -z ${apt_updated:-} ]]; then
        "${sudo[@]}" apt-get update -qq
        apt_updated=1
    fi
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

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
