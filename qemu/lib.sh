# shellcheck shell=bash
# Helpers shared by qemu/run.sh, qemu/build-kernel.sh and scripts/dist.sh. Sourced, not
# executed.

# Used by the scripts that source this file.
# shellcheck disable=SC2034
QEMU_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034
CACHE=${PMUSTRESS_QEMU_CACHE:-$HOME/.cache/pmustress-qemu}
export DEBIAN_FRONTEND=noninteractive

# LOG_TAG: who speaks (scripts/dist.sh sources this file too).
log() { printf '[%s %(%H:%M:%S)T] %s\n' "${LOG_TAG:-qemu}" -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Packages that are not "install ok installed" among the arguments.
missing_pkgs() {
    local p status
    for p in "$@"; do
        status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
        [[ $status == "install ok installed" ]] || printf '%s\n' "$p"
    done
}

APT_UPDATED=${APT_UPDATED:-0}
apt_update() {
    if [[ $APT_UPDATED == 0 ]]; then
        log "apt-get update"
        apt-get update -q >&2
        APT_UPDATED=1
    fi
}

ensure_arm64_arch() {
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        log "dpkg --add-architecture arm64"
        dpkg --add-architecture arm64
        APT_UPDATED=0
        apt_update
    fi
}

# Install the packages that are missing; run apt-get update only when apt does not know
# one of them (fresh machine, or a newly added architecture).
ensure_pkgs() {
    local missing p
    mapfile -t missing < <(missing_pkgs "$@")
    ((${#missing[@]})) || return 0
    for p in "${missing[@]}"; do
        if ! apt-cache show "$p" >/dev/null 2>&1; then
            apt_update
            break
        fi
    done
    log "apt-get install ${missing[*]}"
    apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

# Run "$@" while holding an exclusive lock on file $1 (then shift).
with_lock() {
    local lockfile=$1
    shift
    mkdir -p "$(dirname "$lockfile")"
    (
        flock 9
        "$@"
    ) 9>"$lockfile"
}
