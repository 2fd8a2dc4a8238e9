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

