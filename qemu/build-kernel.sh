#!/bin/bash
# Build the small pseudo-NMI-capable arm64 kernel from Debian's linux-source-6.1 with
# the committed fragment qemu/kernel.config, cached by a hash of the fragment, the
# source version and the cross compiler version. Prints the path of the Image.
#
#   qemu/build-kernel.sh [small|oracle]
#
# small (the default): the stock driver. oracle: the same with qemu/patches/oracle.patch
# applied (the driver counts its lost, handled, throttled and re-based overflows; it
# changes no behaviour), cached apart under a key that also covers the patch. The oracle
# build fails if the compiler warns about either patched file.
#
# Environment: PMUSTRESS_QEMU_CACHE (default ~/.cache/pmustress-qemu),
# PMUSTRESS_KERNEL_JOBS (default 3), PMUSTRESS_KEEP_KERNEL_BUILD=1 keeps the source and
# object trees (about 1.5 GB) after a successful build.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PATCHED_FILES=(arch/arm64/kernel/perf_event.c drivers/perf/arm_pmu.c)
VARIANT=${1:-small}

build() {
    local key=$1 out=$2 work srcdir objdir start
    work=$CACHE/kernel/work-$key
    srcdir=$work/src
    objdir=$work/obj
    start=$SECONDS
    rm -rf "$work"
    mkdir -p "$srcdir" "$objdir"
    log "unpacking /usr/src/$SRC_PKG.tar.xz"
    tar -xJf "/usr/src/$SRC_PKG.tar.xz" -C "$srcdir" --strip-components=1
    if [[ $VARIANT == oracle ]]; then
        log "applying $PATCH"
        patch -s -p1 -d "$srcdir" --no-backup-if-mismatch <"$PATCH" >&2 ||
            die "oracle.patch does not apply to $SRC_PKG"
    fi
    log "configuring (allnoconfig + $FRAGMENT)"
    kernel_make "$srcdir" "$objdir" KCONFIG_ALLCONFIG="$FRAGMENT" allnoconfig
    check_config "$objdir/.config"
    log "building Image with -j$KERNEL_JOBS (about 10 CPU-minutes)"
    # The compiler's messages go to the log as usual and to a file, to look for warnings
    # in the patched files.
    nice -n 10 make -s -C "$srcdir" O="$objdir" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- \
        -j"$KERNEL_JOBS" Image 2> >(tee "$work/make.stderr" >&2) >&2
    check_config "$objdir/.config"
    if [[ $VARIANT == oracle ]]; then
        local f
        for f in "${PATCHED_FILES[@]}"; do
            if grep -F "$f" "$work/make.stderr" | grep -q 'warning:'; then
                grep -F "$f" "$work/make.stderr" >&2
                die "the compiler warns about $f with oracle.patch applied"
            fi
        done
    fi
    mkdir -p "$out.tmp"
    cp "$objdir/arch/arm64/boot/Image" "$objdir/.config" "$out.tmp/"
    dpkg-query -W -f='${Package} ${Version}\n' "$SRC_PKG" >"$out.tmp/source-version"
    [[ $VARIANT == oracle ]] && cp "$PATCH" "$out.tmp/oracle.patch"
    mv "$out.tmp" "$out"
    if [[ ${PMUSTRESS_KEEP_KERNEL_BUILD:-0} != 1 ]]; then
        rm -rf "$work"
    fi
    log "kernel built in $((SECONDS - start)) s: $out/Image"
}

build_if_missing() {
    [[ -f $2/Image ]] || build "$@"
}

main() {
    case $VARIANT in
    small | oracle) ;;
    *) die "usage: build-kernel.sh [small|oracle]" ;;
    esac
    ensure_pkgs "$SRC_PKG" bc bison flex libssl-dev libelf-dev make xz-utils gcc \
        gcc-aarch64-linux-gnu patch
    local key out
    key=$(kernel_key "$VARIANT")
    out=$CACHE/kernel/$VARIANT-6.1-$key
    # The lock serialises concurrent callers (run.sh starts this in the background).
    with_lock "$CACHE/kernel/lock" build_if_missing "$key" "$out"
    check_config "$out/.config"
    printf '%s\n' "$out/Image"
}

main "$@"
