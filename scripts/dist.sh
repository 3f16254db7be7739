#!/usr/bin/env bash
# Release binaries: pmustress, fully static, for x86_64 and aarch64 Linux.
#
#   scripts/dist.sh [--out DIR] [ARCH...]     (ARCH: x86_64, aarch64; default both)
#
# Writes DIR/pmustress-VERSION-ARCH-linux (default DIR: dist/ of this
# repository) and DIR/SHA256SUMS over every such binary in DIR. Built
# --no-default-features (no plotting on a machine that only runs tests),
# --locked, static (glibc's static libraries: nothing to install on the
# target); `pmustress --version` names the commit. The aarch64 build is the
# one qemu/run.sh boots (scripts/static-build.sh). On an x86_64 Debian 12
# host; as root when apt must install the aarch64 toolchain (gcc-aarch64-
# linux-gnu, and Debian's rustc-web when rustup has no aarch64 target).
# Cargo's target directories: target/dist-rustup, target/dist-debian.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_TAG=dist
# shellcheck source-path=SCRIPTDIR source=../qemu/lib.sh
. "$ROOT/qemu/lib.sh"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

# The checks a release binary must pass: static (no interpreter, no shared
# library), the right machine, and the version and commit it says.
check_binary() {
    local bin=$1 arch=$2 version=$3 head=$4 machine line
    if readelf -lW "$bin" | grep -q 'Requesting program interpreter' ||
        readelf -dW "$bin" | grep -q '(NEEDED)'; then
        die "$bin is not static: $(readelf -dW "$bin" | grep '(NEEDED)' | tr -s ' ' | tr '\n' ';')"
    fi
    machine=$(readelf -hW "$bin" | sed -n 's/^ *Machine: *//p')
    case $arch:$machine in
    x86_64:*X86-64 | aarch64:AArch64) ;;
    *) die "$bin is for '$machine', not $arch" ;;
    esac
    if [[ $arch == "$(uname -m)" ]]; then
        line=$("$bin" --version)
    else
        # Not runnable here: the version string clap prints is in the binary.
        line="pmustress $(grep -aoE "$version \\(commit [0-9a-f]{40}(-dirty)?\\)" "$bin" | head -n1)"
    fi
    [[ $line =~ ^pmustress\ $version\ \(commit\ $head(-dirty)?\)$ ]] ||
        die "$bin says '$line', not version $version at commit $head"
    log "$arch: $line"
}

main() {
    local out=$ROOT/dist arches=() arch version head name tmp
    while (($#)); do
        case $1 in
        --out) out=$2; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        x86_64 | aarch64) arches+=("$1"); shift ;;
        *) usage >&2; exit 2 ;;
        esac
    done
    ((${#arches[@]})) || arches=(x86_64 aarch64)
    version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -n1)
    [[ -n $version ]] || die "no version in $ROOT/Cargo.toml"
    head=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null) || die "$ROOT is not a git checkout: the binary could not name its commit"
    if [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no) ]]; then
        log "WARNING: uncommitted changes: the binaries are not commit $head"
    fi
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    for arch in "${arches[@]}"; do
        static_build "$arch" "$ROOT" "$ROOT/target/dist"
        check_binary "$STATIC_BIN" "$arch" "$version" "$head"
        name=pmustress-$version-$arch-linux
        tmp=$(mktemp "$out/.$name.XXXXXX")
        cp "$STATIC_BIN" "$tmp"
        chmod 755 "$tmp"
        mv -f "$tmp" "$out/$name"
    done
    (
        cd "$out"
        shopt -s nullglob
        sha256sum pmustress-*-linux >SHA256SUMS.tmp
        mv -f SHA256SUMS.tmp SHA256SUMS
    )
    for arch in "${arches[@]}"; do
        name=pmustress-$version-$arch-linux
        log "$out/$name: $(stat -c %s "$out/$name") bytes"
    done
    log "$out/SHA256SUMS:"
    sed 's/^/    /' "$out/SHA256SUMS" >&2
}

main "$@"
