#!/bin/bash
# One step of `git bisect run` on the arm64 PMU driver, without arm64 hardware: build the
# checked-out kernel for arm64, boot it under QEMU with pmustress as init, run pmustress
# in bisect mode, exit with its status.
#
#   cd LINUX-TREE
#   git bisect start BAD GOOD
#   git bisect run /path/to/pmustress/qemu/bisect-step.sh [OPTIONS] [-- PMUSTRESS-RUN-ARGS...]
#
# Options:
#   --bad-rate R     a bad kernel drops at least this many interrupts per overflow
#                    (default 0.001, for the default setting; pmustress run --bad-rate)
#   --baseline DIR   take the bad rate from a bad run's results directory instead
#                    (pmustress run --baseline; the directory is copied into the guest)
#   --confidence C   confidence of a "good" (default 0.99)
#   --fix            hunt a fix, not a regression: "good" (no drop) exits 1 and "bad"
#                    exits 0, for git bisect start --term-old=broken --term-new=fixed
#   --smp N          vCPUs (default 4; pmustress runs one worker per vCPU)
#   --append PARAMS  extra kernel parameters (e.g. irqchip.gicv3_pseudo_nmi=1)
#   --skid SPEC      boot under the QEMU that skids (qemu/build-qemu.sh, built once and
#                    cached) with PMUSTRESS_QEMU_SKID=SPEC: fixed:N, uniform:N or tail:N
#                    events between the overflow flag and its interrupt, as real cores
#                    take it (qemu/README.md, "Skid")
#   --max-guest-seconds N  give up undecided after N guest seconds (default 10; 125)
#   --build-only     build the kernel and exit 0 (125 if it does not build)
#   --src DIR        pmustress source tree (default: the repository holding this script)
# After "--": more `pmustress run` arguments; one that gives a flag of the defaults
# replaces it (e.g. -- --period 100000; --bad-rate and --baseline replace each other).
#
# The kernel: qemu/kernel.config (+ CONFIG_ARM_PMUV3=y, the driver's symbol from 6.3 on)
# merged onto the tree's allnoconfig, then olddefconfig; built out of tree in
# $CACHE/bisect/TREE-ID/obj (TREE-ID: the tree's directory name and a hash of its path),
# incrementally, through ccache when it is installed. Each step's results (build log,
# console, the guest's result directory with pmustress's run.json) are kept in
# $CACHE/bisect/TREE-ID/COMMIT/ (replaced when the same commit is tested again).
#
# Prints one line: "bisect-step COMMIT: good|bad|skip (exit N) ...", with the build,
# boot, guest and wall seconds and the overflows measured and needed.
#
# Exit status, what git bisect run wants: 0 good, 1 bad (pmustress's own 0 and 1; with
# --fix swapped), 125 skip: the commit does not configure or build, does not boot, or
# the run could not decide (pmustress 125, killed, no result). 255 aborts the bisect:
# the bed itself is broken (no qemu, no cross compiler, pmustress does not build, a
# usage error here or in the pmustress arguments), where every step would fail alike,
# and so does an interrupted step (SIGINT, SIGTERM, SIGHUP).
#
# Environment: as qemu/run.sh (PMUSTRESS_QEMU_CACHE, PMUSTRESS_SRC, PMUSTRESS_QEMU_BIN,
# PMUSTRESS_QEMU_CPU, PMUSTRESS_QEMU_ICOUNT, PMUSTRESS_QEMU_TIMEOUT,
# PMUSTRESS_KERNEL_JOBS).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The defaults: the setting that calls the bad kernel bad soonest and the good one good
# in the fewest wall seconds, measured on this bed (qemu/README.md, "Bisecting the
# driver").
# 4 vCPUs, one worker each, moved back to back, at the smallest period QEMU's skid
# allows (above 40000): the 6.1 driver without pseudo-NMI lost 20-34% of all overflows
# there, and with pseudo-NMI the run counts the overflows a good verdict needs 2-3x
# faster than on 2 vCPUs.
SMP=4
PMUSTRESS_DEFAULTS=(--event cycles --migrate ping-pong --period 50000)
# A bad kernel drops at least this many per overflow: far below the 0.20 measured, so
# a bad kernel is called bad (the chance of 4,603 overflows with no drop at a rate of
# 0.005 is 1e-10); the good verdict then needs 4,603 overflows at 0.99.
BAD_RATE=0.001
CONFIDENCE=0.99
# Guest seconds after which a run that has not decided gives up (pmustress --duration: a
# run cut short is never called good: 125). A good verdict takes under 1 s.
RUN_CAP=10
# --skid: PMUSTRESS_QEMU_SKID for the QEMU that skids (boot_guest); none by default.
SKID=""

EXIT_ABORT=255
# What a failure of this script means for the bisect, by stage: setup (the bed: abort),
# kernel (this commit: skip), guest (this commit: skip).
STAGE=setup
FINAL=""

# shellcheck disable=SC2317 # called by the EXIT trap
on_exit() {
    local rc=$?
    [[ -n $FINAL ]] && exit "$FINAL"
    case $STAGE in
    setup)
        log "bisect-step: setup failed (exit $rc, see above): aborting the bisect ($EXIT_ABORT)"
        exit "$EXIT_ABORT" ;;
    *)
        printf 'bisect-step %s: skip (exit 125): the %s step failed (exit %s)%s\n' \
            "${COMMIT:0:12}" "$STAGE" "$rc" "${STEP:+, see $STEP}"
        exit 125 ;;
    esac
}

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

# The guest's init: one pmustress run.
write_init() {
    init_head
    printf 'run_one bisect /pmustress %s\n' "$(printf '%q ' run "${RUN_ARGS[@]}")"
    init_tail
}

# overridden FLAG ARGS...: whether ARGS give FLAG (--bad-rate and --baseline exclude
# each other, so either overrides both).
overridden() {
    local flag=$1 a
    shift
    for a in "$@"; do
        case $flag in
        --bad-rate | --baseline)
            [[ $a == --bad-rate || $a == --bad-rate=* || $a == --baseline || $a == --baseline=* ]] &&
                return 0 ;;
        *) [[ $a == "$flag" || $a == "$flag"=* ]] && return 0 ;;
        esac
    done
    return 1
}

# Build the checked-out tree into $OBJ; sets BUILD_SECONDS. Any failure: skip (125).
build_kernel() {
    local frag=$TREE_DIR/fragment.config cc=() start=$SECONDS
    STAGE=kernel
    mkdir -p "$OBJ"
    { cat "$FRAGMENT"; echo "CONFIG_ARM_PMUV3=y"; } >"$frag.new"
    mv "$frag.new" "$frag"
    if command -v ccache >/dev/null; then
        cc=(CC="ccache aarch64-linux-gnu-gcc")
    fi
    log "bisect-step: configuring $TOP (allnoconfig + qemu/kernel.config, olddefconfig)"
    kernel_make "$TOP" "$OBJ" "${cc[@]}" KCONFIG_ALLCONFIG="$frag" allnoconfig \
        2>>"$STEP/build.log"
    kernel_make "$TOP" "$OBJ" "${cc[@]}" olddefconfig 2>>"$STEP/build.log"
    cp "$OBJ/.config" "$STEP/config"
    check_config "$OBJ/.config"
    if [[ -f $TOP/drivers/perf/arm_pmuv3.c ]] && ! grep -qx CONFIG_ARM_PMUV3=y "$OBJ/.config"; then
        die "the tree has drivers/perf/arm_pmuv3.c but the config lacks CONFIG_ARM_PMUV3=y"
    fi
    log "bisect-step: building Image (-j$KERNEL_JOBS; log: $STEP/build.log)"
    if ! nice -n 10 make -s -C "$TOP" O="$OBJ" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- \
        "${cc[@]}" -j"$KERNEL_JOBS" Image >>"$STEP/build.log" 2>&1; then
        grep -m 20 -E 'error|Error' "$STEP/build.log" >&2 || tail -n 20 "$STEP/build.log" >&2
        FINAL=125
        printf 'bisect-step %s: skip (exit 125): the kernel does not build (%d s; see %s/build.log); %s\n' \
            "${COMMIT:0:12}" $((SECONDS - start)) "$STEP" "$(git -C "$TOP" log -1 --format=%s)" |
            tee "$STEP/verdict"
        exit 125
    fi
    cp "$OBJ/arch/arm64/boot/Image" "$STEP/Image"
    BUILD_SECONDS=$((SECONDS - start))
    log "bisect-step: kernel built in $BUILD_SECONDS s"
}

main() {
    local fix=0 build_only=0 append="" rate_args=() extra=() defaults=() i rc verdict mapped initrd
    local report overflows needed dropped guest wall reason start=$SECONDS
    trap on_exit EXIT
    # Interrupted (Ctrl-C, a killed bisect): stop the bisect, never mark the commit.
    trap 'FINAL=$EXIT_ABORT; exit $EXIT_ABORT' INT TERM HUP
    SRC=${PMUSTRESS_SRC:-$(cd "$QEMU_DIR/.." && pwd)}
    while (($#)); do
        case $1 in
        --bad-rate | --confidence | --baseline | --smp | --append | --skid | --src | --max-guest-seconds)
            (($# >= 2)) || { echo "bisect-step: $1 needs a value" >&2; usage >&2; exit 2; }
            case $1 in
            --bad-rate) BAD_RATE=$2 ;;
            --confidence) CONFIDENCE=$2 ;;
            --baseline) BASELINE=$(cd "$2" && pwd) || exit 2 ;;
            --smp) SMP=$2 ;;
            --append) append=$2 ;;
            --skid) SKID=$2 ;;
            --src) SRC=$2 ;;
            --max-guest-seconds) RUN_CAP=$2 ;;
            esac
            shift 2 ;;
        --fix) fix=1; shift ;;
        --build-only) build_only=1; shift ;;
        --) shift; extra=("$@"); break ;;
        -h | --help) FINAL=0; usage; exit 0 ;;
        *) echo "bisect-step: unknown argument $1" >&2; usage >&2; exit 2 ;;
        esac
    done
    [[ $SMP =~ ^[1-9][0-9]*$ ]] || { echo "bisect-step: --smp takes a number, got $SMP" >&2; exit 2; }
    [[ $RUN_CAP =~ ^[1-9][0-9]*$ ]] ||
        { echo "bisect-step: --max-guest-seconds takes a number, got $RUN_CAP" >&2; exit 2; }
    [[ -z $SKID || $SKID =~ ^(fixed|uniform|tail):[0-9]+$ ]] ||
        { echo "bisect-step: --skid takes fixed:N, uniform:N or tail:N, got $SKID" >&2; exit 2; }
    [[ $(id -u) == 0 ]] || die "run as root (apt-get)"
    TOP=$(git rev-parse --show-toplevel 2>/dev/null) || die "not inside a git work tree"
    TOP=$(cd "$TOP" && pwd -P)
    [[ -f $TOP/Makefile && -d $TOP/arch/arm64 ]] || die "$TOP is not a Linux tree with arch/arm64"
    COMMIT=$(git -C "$TOP" rev-parse HEAD)
    TREE_DIR=$(bisect_tree_dir "$TOP")
    OBJ=$TREE_DIR/obj
    STEP=$TREE_DIR/$COMMIT
    rm -rf "$STEP"
    mkdir -p "$STEP"
    git -C "$TOP" log -1 --format='%H %s' >"$STEP/commit"
    install_host_packages
    ensure_pkgs make bc bison flex libssl-dev libelf-dev gcc
    if ((!build_only)); then
        fetch_busybox
        build_pmustress
        build_host_pmustress
        if [[ -n $SKID ]]; then
            log "bisect-step: the QEMU that skids (qemu/build-qemu.sh; log: $TREE_DIR/build-qemu.log)"
            SKID_QEMU=$("$QEMU_DIR/build-qemu.sh" 2>"$TREE_DIR/build-qemu.log" | tail -n1) ||
                die "building the QEMU that skids failed (see $TREE_DIR/build-qemu.log)"
        fi
        if [[ -n ${BASELINE:-} ]]; then
            rate_args=(--baseline /baseline)
        else
            rate_args=(--bad-rate "$BAD_RATE")
        fi
        defaults=("${PMUSTRESS_DEFAULTS[@]}" --workers "$SMP" "${rate_args[@]}" --confidence "$CONFIDENCE"
            --duration "${RUN_CAP}s")
        # pmustress refuses a flag given twice: a default the user gives again is left out.
        RUN_ARGS=()
        for ((i = 0; i < ${#defaults[@]}; i += 2)); do
            overridden "${defaults[i]}" "${extra[@]}" || RUN_ARGS+=("${defaults[i]}" "${defaults[i + 1]}")
        done
        RUN_ARGS+=("${extra[@]}")
    fi

    build_kernel
    if ((build_only)); then
        FINAL=0
        printf 'bisect-step %s: built in %d s (--build-only)\n' "${COMMIT:0:12}" "$BUILD_SECONDS"
        exit 0
    fi

    STAGE=guest
    initrd=$STEP/initrd.gz
    INITRAMFS_EXTRA=""
    if [[ -n ${BASELINE:-} ]]; then
        INITRAMFS_EXTRA=$STEP/extra
        mkdir -p "$INITRAMFS_EXTRA/baseline"
        find "$BASELINE" -maxdepth 1 -type f ! -name 'raw.csv.gz' ! -name 'deltas.csv' \
            -exec cp {} "$INITRAMFS_EXTRA/baseline/" \;
    fi
    # The run stops itself at RUN_CAP; the guest kills it a little later.
    GUEST_TIMEOUT=$((RUN_CAP + 30))
    make_initramfs "$initrd"
    append="console=ttyAMA0 panic=-1${append:+ $append}"
    printf '%s\n' "commit $(cat "$STEP/commit")" "append $append" "smp $SMP" \
        "run /pmustress run ${RUN_ARGS[*]}" ${SKID:+"qemu $SKID_QEMU" "skid $SKID"} >"$STEP/boot.txt"
    log "bisect-step: booting ${COMMIT:0:12} (-smp $SMP${SKID:+, skid $SKID}): pmustress run ${RUN_ARGS[*]}"
    boot_guest "$STEP" "$STEP/Image" "$SMP" "$append" "$initrd"
    rm -f "$initrd" "$STEP/Image"
    rm -rf "$STEP/extra"

    local d=$STEP/result/runs/bisect
    read -r guest wall < <(run_seconds "$STEP/marks" bisect)
    rc=$(cat "$d/exit_code" 2>/dev/null || echo none)
    # The figures as pmustress's own reader gives them (the verdict is the
    # exit status; a run.json it refuses leaves them "?").
    report=$d/report.json
    read_run "$d/run" "$report" >/dev/null 2>&1 || true
    overflows=$(jq -r '.[0].run.totals.interrupts.overflows // "?"' "$report" 2>/dev/null || echo "?")
    dropped=$(jq -r '.[0].run.totals.interrupts.dropped // "?"' "$report" 2>/dev/null || echo "?")
    needed=$(jq -r '.[0].run.config.bisect.overflows_needed // "?"' "$report" 2>/dev/null || echo "?")
    case $rc in
    0) verdict=good mapped=0 reason="no dropped interrupt in $overflows overflows ($needed needed)" ;;
    1) verdict=bad mapped=1 reason="$dropped dropped in $overflows overflows" ;;
    2)
        cat "$d/stderr" >&2 || true
        FINAL=$EXIT_ABORT
        printf 'bisect-step %s: pmustress refused its arguments (exit 2): aborting the bisect\n' \
            "${COMMIT:0:12}"
        exit "$FINAL" ;;
    125) verdict=skip mapped=125
        reason="pmustress could not decide: $(grep -m1 -iE 'inconclusive|cannot|not enough|bisect: only' "$d/stdout" "$d/stderr" 2>/dev/null | head -n1 | cut -d: -f2- || true)" ;;
    none) verdict=skip mapped=125
        if [[ $BOOT_SECONDS == "?" ]]; then
            reason="the kernel did not boot to init (qemu exit $QEMU_RC, see $STEP/console.log)"
        else
            reason="no result came back (qemu exit $QEMU_RC, see $STEP/console.log)"
        fi ;;
    *) verdict=skip mapped=125 reason="pmustress exited $rc" ;;
    esac
    if ((fix)) && ((mapped == 0 || mapped == 1)); then
        mapped=$((1 - mapped))
        verdict="$verdict, so $([[ $mapped == 0 ]] && echo "old (still broken)" || echo "new (fixed)") with --fix"
    fi
    printf 'bisect-step %s: %s (exit %s): %s; build %ss, boot %ss, guest %ss, run wall %ss, step wall %ss; %s\n' \
        "${COMMIT:0:12}" "$verdict" "$mapped" "$reason" "$BUILD_SECONDS" "$BOOT_SECONDS" \
        "$guest" "$wall" $((SECONDS - start)) "$(git -C "$TOP" log -1 --format=%s)" |
        tee "$STEP/verdict"
    FINAL=$mapped
    exit "$mapped"
}

main "$@"
