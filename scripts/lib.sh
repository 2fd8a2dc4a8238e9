# shellcheck shell=bash disable=SC2154  # prog: set by the sourcing script
# Shell helpers shared by scripts/test, .ci/run and bench/: installing what a
# new Debian 12 machine lacks. The sourcing script sets `prog` (its name in
# messages).

# Installs Debian packages. As root, at once. Otherwise through sudo, and
# only when a person at a terminal says yes: a script that runs sudo
# unasked is one nobody should trust with a machine. Not root and not on a
# terminal (a CI job that is not root, a pipe), it names the packages and
# exits 2 for someone to install them.
apt_install() {
    local sudo=()
    if ((EUID != 0)); then
        if ! command -v sudo >/dev/null 2>&1 || ! [[ -t 0 && -t 1 ]]; then
            echo "$prog: missing Debian packages: $*" >&2
            echo "$prog: install them (sudo apt-get install $*) and run this again" >&2
            exit 2
        fi
        local answer
        read -r -p "$prog: install $* with sudo apt-get? [y/N] " answer
        if [[ ! $answer =~ ^[Yy] ]]; then
            echo "$prog: not installing; install them (sudo apt-get install $*) and run this again" >&2
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

# Where fetched tools go: outside the clone (CI runs in a fresh one each
# time), so a machine fetches them once.
lanyard_tools=${LANYARD_CI_TOOLS:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/lanyard-ci}
export LANYARD_CI_TOOLS=$lanyard_tools

# Major version of the node binary $1, 0 when missing.
node_major() {
    local version
    version=$("$1" --version 2>/dev/null) || version=v0
    version=${version#v}
    version=${version%%.*}
    [[ $version =~ ^[0-9]+$ ]] || version=0
    echo "$version"
}

# Node.js 20+ and npm on PATH (exported, so child processes see them).
# Debian 12's nodejs is 18, so when node is missing or older, or npm is
# missing, the pinned Node.js and npm come from the npm registry (the `node`
# package brings the official binary; npm's own package is self-contained),
# installed once into $lanyard_tools/node by whatever npm there is (Debian's,
# on its node 18, if need be) and put first on PATH.
ensure_node20() {
    local node_version=20.20.2 npm_version=10.9.9
    local node_bin=$lanyard_tools/node/node_modules/.bin
    if (($(node_major node) >= 20)) && command -v npm >/dev/null 2>&1; then
        return
    fi
    if [[ $("$node_bin/node" --version 2>/dev/null) != "v$node_version" ||
        $(PATH="$node_bin:$PATH" npm --version 2>/dev/null) != "$npm_version" ]]; then
        if ! command -v npm >/dev/null 2>&1; then
            echo "$prog: installing Debian's npm, to fetch Node.js $node_version with"
            apt_install npm
        fi
        echo "$prog: installing Node.js $node_version and npm $npm_version (npm registry) into $lanyard_tools/node"
        npm install --prefix "$lanyard_tools/node" --no-audit --no-fund --loglevel=error \
            "node@$node_version" "npm@$npm_version"
    fi
    export PATH="$node_bin:$PATH"
    echo "$prog: node $(node --version) and npm $(npm --version) from $node_bin"
}
