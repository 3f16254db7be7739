#!/bin/bash
# Build the small pseudo-NMI-capable arm64 kernel from Debian's linux-source-6.1 with
# the committed fragment qemu/kernel.config, cached by a hash of the fragment, the
# source version and the cross compiler version. Prints the path of the Image.
#
#   qemu/build-kernel.sh [small|oracle|fixed|faulty]
#
# small (the default): the stock driver. oracle: the same with qemu/patches/oracle.patch
# applied (the driver counts its lost, handled, throttled and re-based overflows; it
# changes no behaviour), cached apart under a key that also covers the patch. fixed: the
# oracle kernel with the candidate fix, qemu/patches/fix.patch, and the oracle's
# counters on it, fix-oracle.patch. faulty: the oracle kernel with qemu/patches/faults.patch,
# whose boot parameter pmustress_fault=N breaks one property `pmustress check` probes.
# The oracle, fixed and faulty builds fail if the compiler warns about a patched file.
#
# The fixed and faulty kernels are built incrementally from the oracle kernel's kept trees when
# they are there (PMUSTRESS_KEEP_KERNEL_BUILD=1 when the oracle kernel was built, as
# .ci/run sets): a copy of its object tree (~90 MB), its source patched in place for
# the build and restored after (content and times, under the kernel lock), so only
# drivers/perf/arm_pmu.c is compiled again and the kernel linked (~1-2 min). Without
# them (not kept, or taken by bisect-known-answer.sh) it is a whole build of its own.
#
# Environment: PMUSTRESS_QEMU_CACHE (default ~/.cache/pmustress-qemu),
# PMUSTRESS_KERNEL_JOBS (default 3), PMUSTRESS_KEEP_KERNEL_BUILD=1 keeps the source and
# object trees (about 1.5 GB) after a successful build.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PATCHED_FILES=(arch/arm64/kernel/perf_event.c drivers/perf/arm_pmu.c)
VARIANT=${1:-small}

# The variant's patches, in order.
variant_patches() {
    case $VARIANT in
    oracle) printf '%s\n' "$PATCH" ;;
    fixed | faulty)
        printf '%s\n' "$PATCH"
        extra_patches "$VARIANT"
        ;;
    esac
}

# apply_patches SRCDIR PATCH...
apply_patches() {
    local srcdir=$1 p
    shift
    for p in "$@"; do
        log "applying $p"
        patch -s -p1 -d "$srcdir" --no-backup-if-mismatch <"$p" >&2 ||
            die "${p##*/} does not apply to $SRC_PKG"
    done
}

# make_image SRCDIR OBJDIR WORK: make Image, the compiler's messages also into
# WORK/make.stderr; fails if the compiler warns about a patched file.
make_image() {
    local srcdir=$1 objdir=$2 work=$3 f
    nice -n 10 make -s -C "$srcdir" O="$objdir" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- \
        -j"$KERNEL_JOBS" Image 2> >(tee "$work/make.stderr" >&2) >&2
    check_config "$objdir/.config"
    if [[ $VARIANT != small ]]; then
        for f in "${PATCHED_FILES[@]}"; do
            if grep -F "$f" "$work/make.stderr" | grep -q 'warning:'; then
                grep -F "$f" "$work/make.stderr" >&2
                die "the compiler warns about $f with the $VARIANT patches applied"
            fi
        done
    fi
}

# save_image OBJDIR OUT PATCH...: the Image, its config and what it was built from.
save_image() {
    local objdir=$1 out=$2 p
    shift 2
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    cp "$objdir/arch/arm64/boot/Image" "$objdir/.config" "$out.tmp/"
    dpkg-query -W -f='${Package} ${Version}\n' "$SRC_PKG" >"$out.tmp/source-version"
    for p in "$@"; do
        cp "$p" "$out.tmp/"
    done
    mv "$out.tmp" "$out"
}

# build_incremental KEY OUT ORACLE-WORK: the fixed or faulty kernel from the oracle
# kernel's kept trees (see the header).
build_incremental() {
    local key=$1 out=$2 owork=$3 work objdir keep start=$SECONDS f p
    local patches=() extra=()
    mapfile -t patches < <(variant_patches)
    mapfile -t extra < <(extra_patches "$VARIANT")
    work=$CACHE/kernel/work-$key
    objdir=$work/obj
    keep=$work/oracle-files
    rm -rf "$work"
    mkdir -p "$work" "$keep"
    log "copying the oracle kernel's object tree $owork/obj"
    cp -a "$owork/obj" "$objdir"
    for f in "${PATCHED_FILES[@]}"; do
        mkdir -p "$keep/$(dirname "$f")"
        cp -p "$owork/src/$f" "$keep/$f"
    done
    # The oracle's source as it was, also when the build fails.
    # shellcheck disable=SC2064 # expand now: the paths are this build's
    trap "restore_oracle_source '$owork/src' '$keep'" EXIT
    apply_patches "$owork/src" "${extra[@]}"
    log "building Image incrementally with -j$KERNEL_JOBS in $objdir"
    make_image "$owork/src" "$objdir" "$work"
    restore_oracle_source "$owork/src" "$keep"
    trap - EXIT
    save_image "$objdir" "$out" "${patches[@]}"
    rm -rf "$work"
    log "kernel built incrementally in $((SECONDS - start)) s: $out/Image"
}

# restore_oracle_source SRCDIR KEEP: the patched files back as the oracle kernel's
# object tree knows them (content and modification times).
restore_oracle_source() {
    local srcdir=$1 keep=$2 f
    [[ -d $keep ]] || return 0
    for f in "${PATCHED_FILES[@]}"; do
        cp -p "$keep/$f" "$srcdir/$f"
    done
    rm -rf "$keep"
}

build() {
    local key=$1 out=$2 work srcdir objdir start okey patches=()
    if [[ $VARIANT == fixed || $VARIANT == faulty ]]; then
        okey=$(kernel_key oracle)
        work=$CACHE/kernel/work-$okey
        if [[ -f $work/obj/vmlinux && -f $CACHE/kernel/oracle-6.1-$okey/Image &&
            ! -e $work/src/.git ]]; then
            build_incremental "$key" "$out" "$work"
            return
        fi
        log "no kept oracle kernel build in $work: building the $VARIANT kernel whole"
    fi
    mapfile -t patches < <(variant_patches)
    work=$CACHE/kernel/work-$key
    srcdir=$work/src
    objdir=$work/obj
    start=$SECONDS
    rm -rf "$work"
    mkdir -p "$srcdir" "$objdir"
    log "unpacking /usr/src/$SRC_PKG.tar.xz"
    tar -xJf "/usr/src/$SRC_PKG.tar.xz" -C "$srcdir" --strip-components=1
    apply_patches "$srcdir" "${patches[@]}"
    log "configuring (allnoconfig + $FRAGMENT)"
    kernel_make "$srcdir" "$objdir" KCONFIG_ALLCONFIG="$FRAGMENT" allnoconfig
    check_config "$objdir/.config"
    log "building Image with -j$KERNEL_JOBS (about 10 CPU-minutes)"
    # The compiler's messages go to the log as usual and to a file, to look for warnings
    # in the patched files.
    make_image "$srcdir" "$objdir" "$work"
    save_image "$objdir" "$out" "${patches[@]}"
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
    small | oracle | fixed | faulty) ;;
    *) die "usage: build-kernel.sh [small|oracle|fixed|faulty]" ;;
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
