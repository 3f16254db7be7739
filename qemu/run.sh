#!/bin/bash
# Known-answer tests of pmustress on Linux's real arm64 PMU driver, under QEMU.
#
#   qemu/run.sh [--src DIR] [--out DIR] CASE...     (or: all, or --list)
#
# On a Debian 12 x86_64 machine, as root: installs what it needs, builds the oracle
# kernel (the small 6.1 kernel with qemu/patches/oracle.patch: the driver counts its own
# lost, handled and re-based overflows; for the fixed-* cases also the fixed kernel,
# the same with the candidate fix qemu/patches/fix.patch), cross-builds pmustress as a static aarch64
# binary, and boots each case: one boot runs a list of short pmustress runs, reading the
# oracle's counters right before and right after each. Per run, pmustress's numbers are
# printed next to the oracle's and must match exactly. Prints one PASS/FAIL line per run
# and per case; exits 0 only if every run passed. See qemu/README.md.
#
# Environment:
#   PMUSTRESS_QEMU_CACHE    cache directory (default ~/.cache/pmustress-qemu)
#   PMUSTRESS_SRC           pmustress source tree (default: the repository holding this script)
#   PMUSTRESS_QEMU_BIN      use this prebuilt static aarch64 binary instead of building
#   PMUSTRESS_HOST_BIN      read results back with this pmustress for this machine
#                           instead of building one (e.g. scripts/dist.sh's x86_64 binary)
#   PMUSTRESS_QEMU_LANES    boots at once (default 2: one host CPU each)
#   PMUSTRESS_QEMU_TIMEOUT  host-side timeout per boot in seconds (default 900)
#   PMUSTRESS_DEBIAN_KERNEL Debian kernel package (default: newest linux-image-6.1.0-NN-arm64-unsigned)
#   PMUSTRESS_QEMU_CPU      qemu -cpu value (default max,pauth-impdef=on)
#   PMUSTRESS_QEMU_ICOUNT   qemu -icount value (default shift=0,sleep=off)
#   PMUSTRESS_QEMU_DURATION budget of each matrix run in guest time (default 1500ms)
#   PMUSTRESS_QEMU_GUEST_TIMEOUT guest-side limit on one pmustress command (default 30 s)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# One boot per (vCPUs, pseudo-NMI) setting, each running a list of runs; together the
# runs cover every value of every axis (qemu/README.md has the table).
# smp2-yield is the stress known answer (qemu/README.md, "The defaults chosen").
# The candidate fix's A/B: the fixed-* cases are their namesakes' runs on the fixed
# kernel (qemu/patches/fix.patch), judged against its oracle like the stock ones
# (qemu/README.md, "A candidate fix").
ALL_CASES=(debian61-migrate branches-125 smp2-nopnmi smp2-pnmi smp4-nopnmi smp4-pnmi
    smp2-yield smp2-unwitnessed smp2-pnmi-unwitnessed fixed-smp2-nopnmi fixed-smp4-bisect
    smp4-pnmi-race check-pnmi check-nopnmi check-fault-period check-fault-overcount
    check-fault-zero skid1k-smp2-pnmi skid1k-check-pnmi skid1k-fixed-smp2-nopnmi
    skid10k-smp2-pnmi)
# skid*-CASE is CASE under the QEMU that skids (see define_case). Cases outside `all`: smp4-bisect (bisect-known-answer.sh runs it on every step), and
# the fixed kernel with pseudo-NMI, open: counting kernel mode, where the NMI races the
# driver's own update of the count, one sample in ~26,000 fits neither driver's rules
# (qemu/README.md, "A candidate fix").
# skid1k-smp2-nopnmi and skidtail-smp2-pnmi pass (qemu/README.md, "Skid") and are left
# out for CI's time (about 50 s of wall each).
MORE_CASES=(smp4-bisect fixed-smp2-pnmi fixed-smp4-pnmi-race skid1k-smp2-nopnmi
    skidtail-smp2-pnmi)

# Guest time per matrix run, measured by the guest's CLOCK_MONOTONIC, which
# -icount shift=0 ties to executed instructions. The checks are exact, so a run need
# not be long to mean something; the classic case (the bug reproduces) gets 2 s.
DURATION=${PMUSTRESS_QEMU_DURATION:-1500ms}
# The Debian stock kernel has no oracle: its case keeps the qualitative answer and the
# budget measured for it (qemu/README.md).
DEBIAN_BUDGET=4s
# The one-worker unmigrated runs keep every pmustress thread on vCPU 0. QEMU's cycle
# counter is virtual time, which also runs while the other vCPU executes: with
# pmustress's own controller thread waking there, the worker's overflow interrupts came
# ~45,000 cycles late in 7 of 10 runs, and 0 of 10 once pinned.
PIN_ALL="taskset -c 0"
# The yield case: guest seconds of each of its two runs (pmustress's defaults and the
# report's taskset loop), and how many times the loop's losses the defaults must make.
# 10, not 20: the loop's losses vary 0.5-164 per guest-second from boot to boot (its
# stops do not: ~450/s; where they fall in the period does, 0.08-0.35 lost per stop)
# while the defaults' stay at 3,100-4,700, so 20 failed a boot whose loop lost
# 160/s (19.6x); 10 holds below a loop at ~310/s (qemu/README.md).
YIELD_SECONDS=${PMUSTRESS_QEMU_YIELD_SECONDS:-3}
YIELD_FACTOR=10

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    echo "Cases (all): ${ALL_CASES[*]}"
    echo "More cases: ${MORE_CASES[*]}"
}

# add_run NAME WRAP EXPECT PMUSTRESS-ARGS...: one run of the current case.
# EXPECT: "any", "lost>0" (the oracle must see losses: the bug reproduces), "lost=0"
# (the oracle must see none), "overdue>0" (the fixed kernel: the oracle must see
# overflows overdue at a stop, the ones the stock driver loses, and none lost), "exit125" (no run.json; the output must match
# EXPECT_MESSAGE), "legacy-drops" (no oracle: the Debian kernel's qualitative answer),
# "wide" (as "any", but an open limit of the judge waives the ambiguity bound: a run
# above it prints OPEN with the numbers, never PASS; see check_oracle), "unwitnessed"
# (runs without the count witness: the records do not decide every gap, so no
# ambiguity bound; where the driver lost, the run must not be clean), "baseline" (not
# pmustress: /bed/tester ARGS, qemu/tester/tester.sh; only the oracle's figures),
# "check:EXIT:PROFILER:RR" (a `pmustress check`: its exit status, and the probes that
# made the machine unfit for profilers and for rr, comma-separated, "-" for none, "*"
# for not checked; under 30 lines and 60 guest seconds; see check_fitness).
add_run() {
    RUN_NAMES+=("$1")
    RUN_WRAPS+=("$2")
    # Pseudo-NMI loses nothing only where the PMU does not skid: with skid, a stop can
    # clear a flag whose NMI has not been raised yet (qemu/README.md, "Skid"). The
    # oracle's exact checks still hold pmustress to what the driver lost.
    if [[ -n $SKID && $3 == lost=0 ]]; then
        RUN_EXPECTS+=(any)
    else
        RUN_EXPECTS+=("$3")
    fi
    if [[ $3 == baseline ]]; then
        RUN_PROGS+=(/bed/tester)
    else
        RUN_PROGS+=(/pmustress)
    fi
    shift 3
    RUN_ARGS+=("$(printf '%q ' "$@")")
}

# m WORKERS MIGRATE MODE PERIOD [EXTRA...]: the arguments of one matrix run.
# Every run's interrupt skid is given (QEMU's CPU table figure, 0): measured before the
# run, its 500 overflows would be among the oracle's handled ones, and at skid the
# stops in it could clear some, which the oracle counts and the run's judge does not.
NO_SKID_MEASURE=(--interrupt-skid 0)
m() {
    local w=$1 mig=$2 mode=$3 period=$4
    shift 4
    printf '%s\n' run --event cycles --workers "$w" --migrate "$mig" --mode "$mode" \
        --period "$period" --duration "$DURATION" "${NO_SKID_MEASURE[@]}" "$@"
}

# Each case sets KERNEL (oracle|fixed|faulty|debian), SMP, APPEND (extra kernel parameters),
# SKID (the skidding QEMU's PMUSTRESS_QEMU_SKID, from the case's skid*- prefix),
# EXPECT_VERDICT, EXPECT_NMI_EVIDENCE (1: an evidence line says "using NMIs"),
# EXPECT_MESSAGE, YIELD (the runs (STRONG WEAK) whose oracle-counted losses
# check_yield compares), and its runs (add_run). Run names: workers, migration, mode,
# period, k (--include-kernel), inj (--inject-drop-every 97).
define_case() {
    KERNEL=oracle SMP=2 APPEND="" EXPECT_VERDICT="" EXPECT_NMI_EVIDENCE=0 EXPECT_MESSAGE=""
    YIELD=()
    RUN_NAMES=() RUN_WRAPS=() RUN_EXPECTS=() RUN_ARGS=() RUN_PROGS=()
    local a base=$1
    # skid*-CASE: CASE under the QEMU that skids (build-qemu.sh; SKID is its
    # PMUSTRESS_QEMU_SKID): uniform up to 1,000 or 10,000 events, or a long tail.
    SKID=""
    case $base in
    skid1k-*) SKID=uniform:1000 base=${base#skid1k-} ;;
    skid10k-*) SKID=uniform:10000 base=${base#skid10k-} ;;
    skidtail-*) SKID=tail:1000 base=${base#skidtail-} ;;
    esac
    case $base in
    fixed-*) KERNEL=fixed ;;
    check-fault-*) KERNEL=faulty ;;
    esac
    case ${base#fixed-} in
    smp2-nopnmi) # pseudo-NMI built but not enabled: the overflow interrupt can be lost
        EXPECT_VERDICT=disabled
        # The classic case: one worker bounced back to back; losses always seen (on
        # the fixed kernel: overflows overdue at stops always seen, and none lost).
        mapfile -t a < <(DURATION=2s m 1 ping-pong free 100000)
        if [[ $KERNEL == fixed ]]; then
            add_run w1-pingpong-free-100k "" "overdue>0" "${a[@]}"
        else
            add_run w1-pingpong-free-100k "" "lost>0" "${a[@]}"
        fi
        mapfile -t a < <(m 1 none free 100000)
        add_run w1-none-free-100k "$PIN_ALL" any "${a[@]}"
        mapfile -t a < <(m 2 none free 50000)
        add_run w2-none-free-50k "" any "${a[@]}"
        mapfile -t a < <(m 2 round-robin reset 100000)
        add_run w2-roundrobin-reset-100k "" any "${a[@]}"
        mapfile -t a < <(m 1 random free 50000 --include-kernel)
        add_run w1-random-free-50k-k "" any "${a[@]}"
        mapfile -t a < <(m 1 ping-pong reset 50000 --include-kernel)
        # Open as at 4 vCPUs ("wide"): a CI boot of 2026-12-04 left 259 ambiguous (bound
        # 150; the stock driver's rules alone gave the same 259), 84 in the boots before;
        # every bound on dropped still held (439 <= lost 481 <= 439 + 259).
        add_run w1-pingpong-reset-50k-k "" wide "${a[@]}" ;;
    smp2-pnmi) # the same kernel booted with pseudo-NMIs: no interrupt is lost
        APPEND=irqchip.gicv3_pseudo_nmi=1 EXPECT_VERDICT=enabled EXPECT_NMI_EVIDENCE=1
        mapfile -t a < <(m 1 ping-pong free 100000)
        add_run w1-pingpong-free-100k "" "lost=0" "${a[@]}"
        # The detector on the real driver: every 97th overflow discarded on purpose.
        mapfile -t a < <(m 1 ping-pong free 100000 --inject-drop-every 97)
        add_run w1-pingpong-free-100k-inj "" "lost=0" "${a[@]}"
        mapfile -t a < <(m 1 ping-pong reset 100000)
        add_run w1-pingpong-reset-100k "" "lost=0" "${a[@]}"
        mapfile -t a < <(m 2 random free 50000 --include-kernel)
        # Open under the stress defaults (one migrator per CPU, moving running
        # workers): 872 ambiguous > 1% in one run (qemu/README.md).
        add_run w2-random-free-50k-k "" wide "${a[@]}"
        mapfile -t a < <(m 1 none free 100000)
        add_run w1-none-free-100k "$PIN_ALL" "lost=0" "${a[@]}"
        mapfile -t a < <(m 2 round-robin reset 50000)
        add_run w2-roundrobin-reset-50k "" "lost=0" "${a[@]}"
        # Under the QEMU that skids: the skid a run measures before it (SKID's N).
        if [[ -n $SKID ]]; then
            add_run w1-skid-measured "" "skid-measured:${SKID#uniform:}" run --event cycles \
                --workers 1 --migrate none --duration 300ms
        fi ;;
    smp4-nopnmi)
        SMP=4 EXPECT_VERDICT=disabled
        mapfile -t a < <(m 4 ping-pong free 50000)
        add_run w4-pingpong-free-50k "" any "${a[@]}"
        mapfile -t a < <(m 2 random free 100000)
        add_run w2-random-free-100k "" any "${a[@]}"
        mapfile -t a < <(m 1 round-robin reset 100000)
        add_run w1-roundrobin-reset-100k "" any "${a[@]}"
        mapfile -t a < <(m 4 none free 100000 --include-kernel)
        add_run w4-none-free-100k-k "" any "${a[@]}"
        mapfile -t a < <(m 2 ping-pong reset 50000 --include-kernel)
        # Open (qemu/README.md): the vCPU held inside a context switch, see "wide".
        add_run w2-pingpong-reset-50k-k "" wide "${a[@]}" ;;
    smp4-pnmi)
        SMP=4 APPEND=irqchip.gicv3_pseudo_nmi=1 EXPECT_VERDICT=enabled EXPECT_NMI_EVIDENCE=1
        mapfile -t a < <(m 4 ping-pong free 50000)
        add_run w4-pingpong-free-50k "" "lost=0" "${a[@]}"
        mapfile -t a < <(m 4 random reset 100000)
        add_run w4-random-reset-100k "" "lost=0" "${a[@]}"
        mapfile -t a < <(m 2 round-robin free 50000 --include-kernel)
        # Open under the stress defaults, as smp2-pnmi's -k run.
        add_run w2-roundrobin-free-50k-k "" wide "${a[@]}"
        mapfile -t a < <(m 1 none free 100000)
        add_run w1-none-free-100k "$PIN_ALL" "lost=0" "${a[@]}"
        mapfile -t a < <(m 4 ping-pong free 100000 --inject-drop-every 97)
        add_run w4-pingpong-free-100k-inj "" "lost=0" "${a[@]}" ;;
    smp4-bisect) # what each step of a bisect decides (qemu/bisect-step.sh's run)
        # bisect-step.sh's defaults: one ping-pong worker per vCPU at 4 vCPUs, period
        # 50000, bisect mode (stop at the first drop, or once enough overflows are
        # clean). Stock kernel: bad; the fixed kernel: what the fix bisect would see.
        SMP=4 EXPECT_VERDICT=disabled
        local r
        for r in 1 2 3; do
            add_run "bisect-$r" "" any run --event cycles --migrate ping-pong --period 50000 \
                --workers 4 --bad-rate 0.001 --confidence 0.99 --duration 10s "${NO_SKID_MEASURE[@]}"
        done ;;
    smp4-pnmi-race) # the race pseudo-NMI leaves: reset mode counting kernel mode
        # With pseudo-NMI on, the NMI can land inside a task-context update of the
        # same event and re-arm the counter too late (irq_unhandled); a stop before
        # it fires finds the overflow overdue. Measured on both kernels (qemu/README.md,
        # "A candidate fix"); at 4 vCPUs a switch's stop is known only between its two
        # witnesses, hence "wide".
        SMP=4 APPEND=irqchip.gicv3_pseudo_nmi=1 EXPECT_VERDICT=enabled EXPECT_NMI_EVIDENCE=1
        mapfile -t a < <(m 3 ping-pong reset 50000 --include-kernel)
        add_run w3-pingpong-reset-50k-k "" wide "${a[@]}"
        add_run w3-pingpong-reset-50k-k-2 "" wide "${a[@]}" ;;
    smp2-unwitnessed) # verdicts without the count witness (times, none)
        EXPECT_VERDICT=disabled
        mapfile -t a < <(m 2 ping-pong free 100000 --switch-witness times)
        add_run w2-pingpong-free-100k-times "" unwitnessed "${a[@]}"
        mapfile -t a < <(m 2 ping-pong free 100000 --switch-witness none)
        add_run w2-pingpong-free-100k-none "" unwitnessed "${a[@]}"
        mapfile -t a < <(m 4 none free 50000 --switch-witness none)
        add_run w4-none-free-50k-none "" unwitnessed "${a[@]}"
        mapfile -t a < <(m 4 none free 50000 --switch-witness times)
        add_run w4-none-free-50k-times "" unwitnessed "${a[@]}"
        # The time-only witness with the count rate bounded: QEMU's PMU counts
        # cycles at 1 GHz of its virtual clock.
        mapfile -t a < <(m 2 ping-pong free 100000 --switch-witness times --max-count-rate 1G)
        add_run w2-pingpong-free-100k-times-rate "" unwitnessed "${a[@]}"
        mapfile -t a < <(m 4 none free 50000 --switch-witness times --max-count-rate 1G)
        add_run w4-none-free-50k-times-rate "" unwitnessed "${a[@]}" ;;
    smp2-pnmi-unwitnessed) # the same without losses: never dropped
        APPEND=irqchip.gicv3_pseudo_nmi=1 EXPECT_VERDICT=enabled EXPECT_NMI_EVIDENCE=1
        mapfile -t a < <(m 2 random free 100000 --switch-witness times)
        add_run w2-random-free-100k-times "" unwitnessed "${a[@]}"
        mapfile -t a < <(m 2 random free 100000 --switch-witness times --max-count-rate 1G)
        add_run w2-random-free-100k-times-rate "" unwitnessed "${a[@]}"
        mapfile -t a < <(m 2 ping-pong free 100000 --switch-witness times --max-count-rate 1G)
        add_run w2-pingpong-free-100k-times-rate "" unwitnessed "${a[@]}"
        mapfile -t a < <(m 2 ping-pong free 100000 --switch-witness none)
        add_run w2-pingpong-free-100k-none "" unwitnessed "${a[@]}"
        mapfile -t a < <(m 4 none free 50000 --switch-witness none)
        add_run w4-none-free-50k-none "" unwitnessed "${a[@]}"
        mapfile -t a < <(m 4 none free 50000 --switch-witness times)
        add_run w4-none-free-50k-times "" unwitnessed "${a[@]}" ;;
    debian61-migrate) # Debian's stock 6.1 kernel (no CONFIG_ARM64_PSEUDO_NMI), no oracle
        KERNEL=debian EXPECT_VERDICT=not-built
        add_run w1-pingpong-free-100k "" legacy-drops run --event cycles --workers 1 \
            --migrate ping-pong --period 100000 --duration "$DEBIAN_BUDGET" "${NO_SKID_MEASURE[@]}" ;;
    smp2-yield) # stress power: the defaults against the original report's method
        EXPECT_VERDICT=disabled YIELD=(defaults loop)
        # What a user gets without options (at 2 vCPUs: four workers, one
        # migrator moving any of them every 50 us), and the report's kind of C
        # tester moved by its shell taskset loop, in the same boot.
        add_run defaults "" any run --event cycles --duration "${YIELD_SECONDS}s" "${NO_SKID_MEASURE[@]}"
        add_run loop "" baseline loop 100000 "$YIELD_SECONDS" ;;
    check-pnmi) # `pmustress check` on a healthy pseudo-NMI kernel
        APPEND=irqchip.gicv3_pseudo_nmi=1 EXPECT_VERDICT=enabled
        # Fit for profilers with the defaults; unfit for rr: QEMU's core is in no rr
        # table and its PMU has no branch event (BR_RETIRED opens and reads 0).
        if [[ -n $SKID ]]; then
            # With skid a stop clears overflows whose NMI has not come yet: the
            # default stress finds them (qemu/README.md, "Skid").
            add_run profiler "" "check:1:lost_overflow:*" check --for profiler
        else
            add_run profiler "" "check:0:-:*" check --for profiler
        fi
        add_run all "" "check:1:-:pmu,counts" check --quick ;;
    check-nopnmi) # the stock driver without pseudo-NMI loses overflows at stops
        EXPECT_VERDICT=disabled
        add_run profiler "" "check:1:lost_overflow:*" check --for profiler --duration 5s ;;
    check-fault-period) # IOC_PERIOD applied only at the next overflow (faults.patch)
        APPEND="irqchip.gicv3_pseudo_nmi=1 pmustress_fault=1" EXPECT_VERDICT=enabled
        add_run profiler "" "check:1:ioc_period:pmu,counts" check --quick --for profiler ;;
    check-fault-overcount) # each overflow interrupt adds 50 events (faults.patch)
        APPEND="irqchip.gicv3_pseudo_nmi=1 pmustress_fault=2" EXPECT_VERDICT=enabled
        add_run profiler "" "check:1:pmi_overcount:pmu,counts,pmi_overcount" \
            check --quick --for profiler ;;
    check-fault-zero) # counters that read 0 (faults.patch)
        APPEND="irqchip.gicv3_pseudo_nmi=1 pmustress_fault=3" EXPECT_VERDICT=enabled
        add_run profiler "" "check:1:counts:pmu,counts" check --quick --for profiler ;;
    branches-125) # QEMU's PMU has no branch event: cannot test here
        EXPECT_MESSAGE='cpu_cycles'
        add_run branches "" exit125 run --workers 1 --duration 1s ;;
    *) return 1 ;;
    esac
}

# ---------------------------------------------------------------------------------------
# Host setup

# Newest Debian 6.1 arm64 kernel package name, or $PMUSTRESS_DEBIAN_KERNEL.
debian_kernel_pkg() {
    local pkg=${PMUSTRESS_DEBIAN_KERNEL:-}
    if [[ -z $pkg ]]; then
        pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-arm64-unsigned$' |
            cut -d' ' -f1 | sort -V | tail -n1)
    fi
    if [[ -z $pkg ]]; then
        apt_update
        pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-arm64-unsigned$' |
            cut -d' ' -f1 | sort -V | tail -n1)
    fi
    [[ -n $pkg ]] || die "no linux-image-6.1.0-NN-arm64-unsigned package in apt's lists"
    printf '%s\n' "$pkg"
}

# Sets DEBIAN_IMAGE, DEBIAN_CONFIG, DEBIAN_RELEASE.
fetch_debian_kernel() {
    local pkg root vmlinuz
    pkg=$(debian_kernel_pkg)
    root=$(fetch_arm64_deb "$pkg")
    vmlinuz=$(find "$root/boot" -name 'vmlinuz-*' | head -n1)
    [[ -n $vmlinuz ]] || die "no boot/vmlinuz-* in $pkg"
    DEBIAN_IMAGE=$vmlinuz
    DEBIAN_RELEASE=${vmlinuz##*/vmlinuz-}
    DEBIAN_CONFIG=$root/boot/config-$DEBIAN_RELEASE
}

# ---------------------------------------------------------------------------------------
# Guest

# The init script of one boot: every run of the current case in turn.
write_init() {
    local i
    init_head
    for i in "${!RUN_NAMES[@]}"; do
        printf 'run_one %s %s%s %s\n' "${RUN_NAMES[i]}" \
            "${RUN_WRAPS[i]:+${RUN_WRAPS[i]} }" "${RUN_PROGS[i]}" "${RUN_ARGS[i]% }"
    done
    init_tail
}

# run_case NAME: boots the case, leaves everything in $OUT/NAME, prints PASS/FAIL per
# run and for the case.
run_case() {
    local name=$1 dir image initrd append qemu_rc i failed=0 boot wall open suffix
    local yield_failed=0
    define_case "$name"
    dir=$OUT/$name
    rm -rf "$dir"
    mkdir -p "$dir"
    initrd=$dir/initrd.gz
    if [[ $KERNEL == debian ]]; then
        image=$DEBIAN_IMAGE
        make_initramfs "$initrd" "$DEBIAN_CONFIG" "$DEBIAN_RELEASE"
    elif [[ " ${RUN_EXPECTS[*]} " == *" baseline "* ]]; then
        image=$ORACLE_IMAGE
        INITRAMFS_EXTRA=$TESTER_EXTRA make_initramfs "$initrd"
    elif [[ $KERNEL == fixed ]]; then
        image=$FIXED_IMAGE
        make_initramfs "$initrd"
    elif [[ $KERNEL == faulty ]]; then
        image=$FAULTY_IMAGE
        make_initramfs "$initrd"
    else
        image=$ORACLE_IMAGE
        make_initramfs "$initrd"
    fi
    append="console=ttyAMA0 panic=-1 $APPEND"
    append=${append% }
    {
        [[ -z $SKID ]] || printf '%s\n' "qemu $SKID_QEMU" "skid $SKID"
        printf '%s\n' "kernel $image" "append $append" "smp $SMP" "cpu $QEMU_CPU" \
            "icount $QEMU_ICOUNT"
        for i in "${!RUN_NAMES[@]}"; do
            printf 'run %s: %s%s %s\n' "${RUN_NAMES[i]}" \
                "${RUN_WRAPS[i]:+${RUN_WRAPS[i]} }" "${RUN_PROGS[i]}" "${RUN_ARGS[i]% }"
        done
    } >"$dir/boot.txt"
    log "$name: booting ($KERNEL kernel, -smp $SMP${APPEND:+, $APPEND}${SKID:+, skid $SKID}): ${#RUN_NAMES[@]} runs"
    boot_guest "$dir" "$image" "$SMP" "$append" "$initrd"
    rm -f "$initrd"
    qemu_rc=$QEMU_RC boot=$BOOT_SECONDS wall=$BOOT_WALL
    for i in "${!RUN_NAMES[@]}"; do
        check_run "$name" "$i" "$dir" "$qemu_rc" || failed=$((failed + 1))
    done
    if ((${#YIELD[@]})); then
        check_yield "$name" "$dir" "${YIELD[@]}" || yield_failed=1
    fi
    REPORTED+=("$name")
    if ((failed == 0 && yield_failed == 0)); then
        open=$(grep -c "^  OPEN $name/" "$SUMMARY" 2>/dev/null || true)
        suffix=""
        ((open == 0)) || suffix=" ($open OPEN: a known limit of the judge, see its line)"
        printf 'PASS %s: %d runs%s, boot %ss, wall %ss\n' "$name" "${#RUN_NAMES[@]}" \
            "$suffix" "$boot" "$wall" | tee -a "$SUMMARY"
        return 0
    fi
    suffix=""
    ((yield_failed == 0)) || suffix=", the yield check failed"
    printf 'FAIL %s: %d of %d runs failed%s, boot %ss, wall %ss (see %s)\n' "$name" "$failed" \
        "${#RUN_NAMES[@]}" "$suffix" "$boot" "$wall" "$dir" | tee -a "$SUMMARY"
    return 1
}

# ---------------------------------------------------------------------------------------
# Known answers

# A field of run.json, from `pmustress report --format json`'s output $2.
jqr() { jq -r ".[0].run | $1" "$2" 2>/dev/null || echo "?"; }

# The most overflows a run may call ambiguous (ARGS OVERFLOWS). In free mode with
# user-only counting every stop's count is exact and the judge's replay has one
# explanation: none. With --include-kernel the count moves between the witness and
# the stop, and under -icount by up to whole periods (virtual time runs while the
# other vCPUs execute); in reset mode a restart is placed only within the handler's
# slack: both can leave a loss and an interrupt a period late fitting the same
# records. There, 1% of the overflows (at least 2): more is a judge that gives up.
ambiguous_max() {
    local args=$1 overflows=$2
    if [[ $args != *--include-kernel* && $args != *"--mode reset"* ]]; then
        echo 0
    elif ((overflows / 100 > 2)); then
        echo $((overflows / 100))
    else
        echo 2
    fi
}

# check_run CASE INDEX DIR QEMU_RC: one run's known answer; prints its PASS/FAIL line
# (also into $SUMMARY) and appends its numbers to $TSV.
check_run() {
    local name=$1 i=$2 dir=$3 qemu_rc=$4 run expect args d json report why fails=() notes=() exit_code="?"
    local verdict="-" run_verdict="-" status nmi_ev signals="-" guest run_wall figures ours="" oracle=""
    local k v inj=0 f
    local -A P=() O=() L=()
    run=${RUN_NAMES[i]} expect=${RUN_EXPECTS[i]} args=${RUN_ARGS[i]}
    [[ $args == *--inject-drop-every* ]] && inj=1
    d=$dir/result/runs/$run
    json=$d/run/run.json report=$d/report.json
    read -r guest run_wall < <(run_seconds "$dir/marks" "$run")

    if [[ ! -f $d/exit_code ]]; then
        if ((qemu_rc == 124 || qemu_rc == 137)); then
            fails+=("timed out after ${TIMEOUT}s")
        else
            fails+=("no result came back (qemu exit $qemu_rc)")
        fi
    else
        exit_code=$(<"$d/exit_code")
    fi

    if [[ $expect == exit125 ]]; then
        [[ $exit_code == 125 ]] || fails+=("exit code $exit_code, want 125")
        grep -qiE "$EXPECT_MESSAGE" "$d/stdout" "$d/stderr" 2>/dev/null ||
            fails+=("output does not match /$EXPECT_MESSAGE/")
        figures="exit $exit_code"
    elif [[ $expect == baseline ]]; then
        check_baseline
    elif [[ $expect == check:* ]]; then
        check_fitness
    elif [[ ! -f $json ]]; then
        fails+=("no run/run.json")
        figures="exit $exit_code"
    elif ! why=$(read_run "$d/run" "$report"); then
        fails+=("$why")
        figures="exit $exit_code"
    else
        verdict=$(jqr '.fingerprint.pseudo_nmi.verdict // "missing"' "$report")
        nmi_ev=$(jqr '[.fingerprint.pseudo_nmi.evidence[]? | select(test("using NMIs"))] | length' "$report")
        status=$(jqr '.exit_status // "missing"' "$report")
        run_verdict=$(jqr '.verdict // "missing"' "$report")
        signals=$(jqr '.totals.signals // "missing"' "$report")
        [[ $exit_code == "?" || $status == "$exit_code" ]] ||
            fails+=("run.json exit_status $status but the process exited $exit_code")
        [[ -z $EXPECT_VERDICT || $verdict == "$EXPECT_VERDICT" ]] ||
            fails+=("pseudo-NMI verdict $verdict, want $EXPECT_VERDICT")
        if ((EXPECT_NMI_EVIDENCE)) && [[ $nmi_ev != [1-9]* ]]; then
            fails+=("no pseudo-NMI evidence line containing \"using NMIs\"")
        fi
        [[ $signals =~ ^[0-9]+$ ]] && ((signals > 0)) || fails+=("signals $signals")
        # The judge's interrupt totals (results/README.md), for the checks below.
        for k in dropped samples overflows ambiguous record_lost rebased_in_handler; do
            L[$k]=$(jqr ".totals.interrupts.$k // \"missing\"" "$report")
        done
        L[windows]=$(jqr '.totals.anomalies["dropped-interrupt"] // 0' "$report")
        if [[ $expect == legacy-drops ]]; then
            check_legacy
        elif [[ $expect == skid-measured:* ]]; then
            check_skid_measured
        else
            check_oracle
        fi
    fi

    f=PASS
    ((${#notes[@]} == 0)) || f=OPEN
    ((${#fails[@]} == 0)) || f=FAIL
    {
        printf '%s\t%s\t%s\t%s\t%s\t%s' "$name" "$run" "$exit_code" "$verdict" "$guest" \
            "$run_wall"
        for k in samples on_time late rebased_in_handler dropped rebased_at_restart ambiguous \
            throttled injected stops count_wraps; do
            printf '\t%s' "${P[$k]:--}"
        done
        for k in overflows record_lost; do
            printf '\t%s' "${L[$k]:--}"
        done
        for k in "${ORACLE_COUNTERS[@]}" "${FIXED_ORACLE_COUNTERS[@]}"; do
            printf '\t%s' "${O[$k]:--}"
        done
        printf '\t%s\n' "$f"
    } >>"$TSV"

    figures+=", guest ${guest}s in ${run_wall}s"
    if ((${#fails[@]} == 0)); then
        local IFS=';'
        printf '  %s %s/%s: %s%s\n' "$f" "$name" "$run" "${notes[*]:+${notes[*]}; }" "$figures" |
            tee -a "$SUMMARY"
        return 0
    fi
    local IFS=';'
    printf '  FAIL %s/%s: %s; %s (see %s)\n' "$name" "$run" "${fails[*]}" "$figures" "$d" |
        tee -a "$SUMMARY"
    return 1
}

# A `pmustress check` (uses check_run's locals): EXPECT is check:EXIT:PROFILER:RR.
check_fitness() {
    local want_exit want_profiler want_rr doc=$d/run/check.json got lines
    IFS=: read -r _ want_exit want_profiler want_rr <<<"$expect"
    [[ $exit_code == "$want_exit" ]] || fails+=("exit code $exit_code, want $want_exit")
    if [[ ! -f $doc ]]; then
        fails+=("no run/check.json")
        figures="exit $exit_code"
        return
    fi
    [[ $(jq -r .exit_status "$doc") == "$exit_code" ]] ||
        fails+=("check.json exit_status $(jq -r .exit_status "$doc") but the process exited $exit_code")
    verdict=$(jq -r '.fingerprint.pseudo_nmi.verdict' "$doc")
    [[ -z $EXPECT_VERDICT || $verdict == "$EXPECT_VERDICT" ]] ||
        fails+=("pseudo-NMI verdict $verdict, want $EXPECT_VERDICT")
    local use want
    for use in profiler rr; do
        want=$want_profiler
        [[ $use == rr ]] && want=$want_rr
        got=$(jq -r --arg u "$use" '[.findings[] | select(.unfit_for | index($u)) | .probe] |
            if length == 0 then "-" else join(",") end' "$doc")
        [[ $want == "*" || $got == "$want" ]] ||
            fails+=("unfit for $use because of $got, want $want")
    done
    lines=$(wc -l <"$d/stdout")
    ((lines < 30)) || fails+=("$lines lines of output, want under 30")
    [[ $guest == "?" ]] || awk -v g="$guest" 'BEGIN { exit !(g < 60) }' ||
        fails+=("${guest} guest seconds, want under 60")
    figures="exit $exit_code, $lines lines, $(jq -r '[.findings[] |
        "\(.probe) \(.status)"] | join(", ")' "$doc")"
    figures+="; $(jq -r '.findings[] | select(.probe == "skid") | .evidence' "$doc")"
}

# The Debian stock kernel: no oracle, the qualitative answer (uses check_run's locals).
check_legacy() {
    [[ $exit_code == 1 ]] || fails+=("exit code $exit_code, want 1")
    [[ ${L[dropped]} =~ ^[0-9]+$ ]] && ((L[dropped] > 0)) ||
        fails+=("no dropped interrupt reported: raise the budget, do not weaken the test")
    # The accounting holds: every overflow is a sample, a drop, ambiguous or in a
    # ring gap, so the drops are overflows the kernel wrote no sample record for.
    [[ ${L[overflows]} =~ ^[0-9]+$ && ${L[samples]} =~ ^[0-9]+$ ]] &&
        ((L[overflows] == L[samples] + L[dropped] + L[ambiguous] + L[record_lost])) ||
        fails+=("overflows ${L[overflows]} != samples ${L[samples]} + dropped ${L[dropped]} + ambiguous ${L[ambiguous]} + record_lost ${L[record_lost]}")
    figures="exit $exit_code, verdict $verdict, signals $signals, dropped ${L[dropped]}"
    figures+=" (${L[windows]} windows), samples ${L[samples]}, overflows ${L[overflows]},"
    figures+=" re-based ${L[rebased_in_handler]} (no oracle on this kernel)"
}

# A run whose interrupt skid was measured before it (no --interrupt-skid): the measure
# saw the skidding QEMU's skid, and the judge took it (QEMU's table says 0). For
# uniform:N, the median of the draws lies within N's middle fifth (4.5 standard
# deviations at 500 draws) and the largest within its last tenth but with chance
# 0.9^400 at the 400 draws required. Not bounded above: QEMU adds its own delivery delay
# now and then (1,389 at uniform:1000 in one of 500, and check's probe saw 4,601), as a
# VM does. The pass sizes its loop from one count of the event, so it sees 500 overflows
# give or take one. Its oracle counts hold the measure's own overflows: not compared
# (uses check_run's locals).
check_skid_measured() {
    local n=${expect#skid-measured:} m
    m=$(jq -c '.config.interrupt_skid_measured // empty' "$json")
    if [[ -z $m ]]; then
        fails+=("no interrupt_skid_measured in run.json: $(jq -r '.config.interrupt_skid_not_measured // "and no reason"' "$json")")
        figures="exit $exit_code"
        return
    fi
    local -A S=()
    for k in overflows p50 p99 max missed; do
        S[$k]=$(jq -r ".config.interrupt_skid_measured.$k" "$json")
    done
    S[judged]=$(jq -r '.config.interrupt_skid' "$json")
    ((S[overflows] >= 400)) || fails+=("measured over ${S[overflows]} overflows, want 400 or more")
    ((S[judged] == S[max])) || fails+=("judged with interrupt skid ${S[judged]}, measured ${S[max]}")
    if [[ $n =~ ^[0-9]+$ ]]; then
        ((n * 2 / 5 <= S[p50] && S[p50] <= n * 3 / 5)) ||
            fails+=("measured skid p50 ${S[p50]}, want $((n * 2 / 5))..$((n * 3 / 5)) (uniform:$n)")
        ((S[max] >= n * 9 / 10)) ||
            fails+=("measured skid max ${S[max]}, want $((n * 9 / 10)) or more (uniform:$n)")
    fi
    figures="exit $exit_code, verdict $run_verdict; interrupt skid measured: p50 ${S[p50]}"
    figures+=" p99 ${S[p99]} max ${S[max]} over ${S[overflows]} overflows, ${S[missed]} missed"
}

# A baseline run (not pmustress): it ran, and what the oracle counted (uses check_run's
# locals).
check_baseline() {
    local line
    [[ $exit_code == 0 ]] || fails+=("exit code $exit_code, want 0")
    for k in "${ORACLE_COUNTERS[@]}"; do
        O[$k]=$(oracle_delta "$d" "$k")
        [[ ${O[$k]} != missing ]] || fails+=("no oracle counter $k (not the oracle kernel?)")
    done
    line=$(grep -m1 '^counters: ' "$d/stdout" 2>/dev/null || true)
    [[ -n $line ]] || fails+=("the tester printed no 'counters:' line")
    figures="exit $exit_code | tester: ${line#counters: } | oracle: lost ${O[lost]}"
    figures+=" stops ${O[stops]} overdue_at_stop ${O[overdue_at_stop]} handled ${O[handled]}"
}

# check_yield CASE DIR STRONG WEAK: the stress known answer. Run STRONG (pmustress's
# defaults) must make the driver lose at least $YIELD_FACTOR times what run WEAK (the
# original report's taskset loop) made in the same boot, over the same guest time, and
# lose something. The oracle counts the losses whatever program caused them.
check_yield() {
    local name=$1 dir=$2 strong=$3 weak=$4 ls lw ss sw why="" figures
    ls=$(oracle_delta "$dir/result/runs/$strong" lost)
    lw=$(oracle_delta "$dir/result/runs/$weak" lost)
    ss=$(oracle_delta "$dir/result/runs/$strong" stops)
    sw=$(oracle_delta "$dir/result/runs/$weak" stops)
    figures="$strong lost $ls ($(awk -v c="$ls" -v s="$YIELD_SECONDS" \
        'BEGIN { printf "%.1f", c / s }')/s, stops $ss), $weak lost $lw ($(awk -v c="$lw" \
        -v s="$YIELD_SECONDS" 'BEGIN { printf "%.1f", c / s }')/s, stops $sw) in ${YIELD_SECONDS} guest-s each"
    if [[ ! $ls =~ ^[0-9]+$ || ! $lw =~ ^[0-9]+$ ]]; then
        why="no oracle counts"
    elif ((ls == 0)); then
        why="the defaults made the driver lose nothing"
    elif ((ls < YIELD_FACTOR * lw)); then
        why="$strong lost $ls < $YIELD_FACTOR x $weak's $lw"
    fi
    if [[ -z $why ]]; then
        printf '  PASS %s/yield: %s; ratio %s >= %s\n' "$name" "$figures" \
            "$( ((lw > 0)) && awk -v a="$ls" -v b="$lw" 'BEGIN { printf "%.1f", a / b }' || echo inf)" \
            "$YIELD_FACTOR" | tee -a "$SUMMARY"
        return 0
    fi
    printf '  FAIL %s/yield: %s; %s (see %s)\n' "$name" "$why" "$figures" "$dir" | tee -a "$SUMMARY"
    return 1
}

# The oracle's exact answers (uses check_run's locals).
check_oracle() {
    local missing=() omissing=() want lo amax without counters=("${ORACLE_COUNTERS[@]}")
    [[ $KERNEL != fixed ]] || counters+=("${FIXED_ORACLE_COUNTERS[@]}")
    for k in "${counters[@]}"; do
        O[$k]=$(oracle_delta "$d" "$k")
        [[ ${O[$k]} != missing ]] || omissing+=("$k")
    done
    for k in samples on_time late rebased_in_handler dropped rebased_at_restart ambiguous \
        throttled injected stops record_lost late_maybe_rebased count_wraps unexplained \
        count_rate_exceeded stock_rules_refuted delivering_rules_refuted dropped_assuming_stock; do
        v=$(jq -r --arg k "$k" '.[0].run.totals.interrupts[$k] // "missing" |
            if type == "number" then . else "missing" end' "$report" 2>/dev/null || echo missing)
        P[$k]=$v
        [[ $v != missing ]] || missing+=(".totals.interrupts.$k")
    done
    oracle="lost ${O[lost]} handled ${O[handled]} throttled ${O[throttled]}"
    oracle+=" rebase_irq ${O[rebase_irq]} rebase_restart ${O[rebase_restart]}"
    oracle+=" restart_overflowed ${O[restart_overflowed]} stops ${O[stops]}"
    oracle+=" overdue_at_stop ${O[overdue_at_stop]} irq_unhandled ${O[irq_unhandled]}"
    oracle+=" irq_in_update ${O[irq_in_update]}"
    oracle+=" update_wrapped ${O[update_wrapped]}"
    [[ $KERNEL != fixed ]] ||
        oracle+=" overdue_delivered ${O[overdue_delivered]} flag_at_stop ${O[flag_at_stop]}"
    ours="dropped ${P[dropped]} ambiguous ${P[ambiguous]} injected ${P[injected]}"
    ours+=" samples ${P[samples]} throttled ${P[throttled]}"
    ours+=" rebased_in_handler ${P[rebased_in_handler]}"
    ours+=" rebased_at_restart ${P[rebased_at_restart]} on_time ${P[on_time]}"
    ours+=" late ${P[late]} stops ${P[stops]} count_wraps ${P[count_wraps]}"
    ours+=" unexplained ${P[unexplained]}"
    ours+=" stock_rules_refuted ${P[stock_rules_refuted]} delivering_rules_refuted ${P[delivering_rules_refuted]}"
    ours+=" dropped_assuming_stock ${P[dropped_assuming_stock]}"
    figures="exit $exit_code, verdict $verdict, signals $signals"
    figures+=" | pmustress: $ours"
    figures+=" | oracle: $oracle"
    if ((${#missing[@]})); then
        fails+=("missing field $(IFS=,; echo "${missing[*]}")")
    fi
    if ((${#omissing[@]})); then
        fails+=("no oracle counter $(IFS=,; echo "${omissing[*]}") (not the oracle kernel?)")
        missing+=("${omissing[@]}")
    fi
    # Known answers about the kernel itself.
    if [[ ${O[lost]} != missing ]]; then
        case $expect in
        "lost>0") ((O[lost] > 0)) ||
            fails+=("the oracle saw no loss: raise the budget, do not weaken the test") ;;
        "lost=0") ((O[lost] == 0)) || fails+=("the oracle saw ${O[lost]} lost, want 0") ;;
        "overdue>0")
            [[ ${O[overdue_at_stop]} == missing ]] || ((O[overdue_at_stop] > 0)) ||
                fails+=("the oracle saw no overflow overdue at a stop: the fix was not exercised, raise the budget")
            ((O[lost] == 0)) || fails+=("the oracle saw ${O[lost]} lost on the fixed kernel, want 0") ;;
        esac
    fi
    ((${#missing[@]} == 0)) || return 0
    # pmustress against the oracle, exactly.
    if ((inj)); then
        ((P[injected] > 0)) || fails+=("injected ${P[injected]}, want some")
    else
        ((P[injected] == 0)) || fails+=("injected ${P[injected]} without --inject-drop-every")
    fi
    # An overflow without an interrupt is a due point a stop found passed with no
    # interrupt taken (overdue_at_stop): its flag cleared there (lost), or consumed
    # by the NMI handler without a sample, the counter re-armed too late
    # (irq_unhandled: the NMI raced a task-context update, see oracle.patch).
    ((O[lost] <= O[overdue_at_stop])) ||
        fails+=("oracle lost ${O[lost]} > overdue_at_stop ${O[overdue_at_stop]}: the oracle contradicts itself")
    want=$((O[overdue_at_stop] + P[injected]))
    local why="oracle overdue_at_stop ${O[overdue_at_stop]} (lost ${O[lost]}) + injected ${P[injected]}"
    if [[ $KERNEL == fixed ]]; then
        # The fixed driver delivers an overflow overdue at a stop after the restart
        # (qemu/patches/fix.patch): each one is either delivered late or lost (a
        # PERIOD ioctl discarded it, or its event's last stop), exactly, once the
        # run's events are freed (fix-oracle.patch). Only the lost ones are drops.
        ((O[overdue_at_stop] == O[overdue_delivered] + O[lost])) ||
            fails+=("oracle overdue_at_stop ${O[overdue_at_stop]} != overdue_delivered ${O[overdue_delivered]} + lost ${O[lost]}: the oracle contradicts itself")
        want=$((O[lost] + P[injected]))
        why="oracle lost ${O[lost]} (overdue_at_stop ${O[overdue_at_stop]}, delivered late ${O[overdue_delivered]}) + injected ${P[injected]}"
        # The judge follows both drivers (--driver-rules auto): a delivering
        # driver's late deliveries are late interrupts, and without an NMI to take
        # an overflow before its stop, the first one refutes the stock driver.
        ((P[unexplained] == 0)) ||
            fails+=("unexplained ${P[unexplained]}: sample records that fit no driver behaviour")
        ((P[delivering_rules_refuted] == 0)) ||
            fails+=("delivering_rules_refuted ${P[delivering_rules_refuted]} on the fixed kernel, want 0")
        if [[ $EXPECT_VERDICT == disabled ]] && ((O[overdue_delivered] > 0)); then
            ((P[stock_rules_refuted] > 0)) ||
                fails+=("the oracle delivered ${O[overdue_delivered]} overflows late and no stream refuted the stock driver's rules")
        fi
    else
        # A stock kernel never refutes the stock driver's rules.
        ((P[stock_rules_refuted] == 0)) ||
            fails+=("stock_rules_refuted ${P[stock_rules_refuted]} on the stock kernel, want 0")
    fi
    if ((P[ambiguous] == 0)); then
        ((P[dropped] == want)) || fails+=("dropped ${P[dropped]}, $why = $want")
    else
        lo=$((want - P[ambiguous]))
        # Every overflow: handled, or without an interrupt (on the fixed kernel the
        # late deliveries are among the handled).
        without=${O[overdue_at_stop]}
        [[ $KERNEL != fixed ]] || without=${O[lost]}
        amax=$(ambiguous_max "$args" $((O[handled] + without)))
        ((lo <= P[dropped] && P[dropped] <= want)) ||
            fails+=("dropped ${P[dropped]} outside [$lo, $want] ($why, ambiguous ${P[ambiguous]})")
        if [[ $expect == unwitnessed ]]; then
            :
        elif ((P[ambiguous] > amax)) && [[ $expect == wide ]]; then
            # An open limit, not a pass: counting kernel mode, a context switch's
            # stop lies between its witness's read and the resume witness's, and
            # at 4 vCPUs under -icount the vCPU is often held inside the switch
            # paths while the cycle counter (virtual time) runs: up to a period
            # and more, so a due point in between fits "lost at the stop" and
            # "taken after the restart". Every bound above and below still holds;
            # the ambiguity bound alone is not applied, and the line says so.
            notes+=("OPEN: ambiguous ${P[ambiguous]} > $amax (--include-kernel at 4 vCPUs: a switch's stop is known only between its two witnesses, qemu/README.md)")
        else
            ((P[ambiguous] <= amax)) ||
                fails+=("ambiguous ${P[ambiguous]}, more than $amax")
        fi
    fi
    # Injected overflows are real sample records pmustress discards. Records the ring
    # lost are the judge's count of overflows in the gap, exact only without a re-base
    # there; the ring is sized so that none is lost (record_lost is 0 in every case).
    ((P[record_lost] == 0)) ||
        fails+=("record_lost ${P[record_lost]}: the sample ring overflowed")
    # --max-count-rate 1G is QEMU's own rate: a count faster is a bug of ours.
    ((P[count_rate_exceeded] == 0)) ||
        fails+=("count_rate_exceeded ${P[count_rate_exceeded]}: faster than QEMU's 1 GHz cycles")
    ((P[samples] + P[injected] == O[handled])) ||
        fails+=("samples ${P[samples]} + injected ${P[injected]} != oracle handled ${O[handled]}")
    ((P[throttled] == O[throttled])) ||
        fails+=("throttled ${P[throttled]}, oracle ${O[throttled]}")
    # A discarded sample that came a period or more late re-based the period in the
    # driver; pmustress judges the stream without it, as if the interrupt was lost, so
    # it cannot see that re-base: at most `injected` of them are invisible.
    # The judge counts a re-base only where every explanation of the records has it;
    # late_maybe_rebased are those some explanation has: the driver's count is
    # between the two. A re-base at a restart follows a loss, so ambiguous bounds it.
    # A count wrap (the kernel's count jumped by 2^32) drops period_left as far, so
    # the driver's next re-arm re-bases, in the handler or at a restart: which one,
    # the records do not say. The wraps themselves are checked exactly.
    ((P[count_wraps] == O[update_wrapped])) ||
        fails+=("count_wraps ${P[count_wraps]}, oracle update_wrapped ${O[update_wrapped]}")
    ((P[rebased_in_handler] <= O[rebase_irq] &&
        O[rebase_irq] <= P[rebased_in_handler] + P[injected] + P[late_maybe_rebased] + P[count_wraps])) ||
        fails+=("rebased_in_handler ${P[rebased_in_handler]}, oracle rebase_irq ${O[rebase_irq]} (injected ${P[injected]}, late_maybe_rebased ${P[late_maybe_rebased]}, count_wraps ${P[count_wraps]})")
    ((P[rebased_at_restart] <= O[rebase_restart] &&
        O[rebase_restart] <= P[rebased_at_restart] + P[ambiguous] + P[count_wraps])) ||
        fails+=("rebased_at_restart ${P[rebased_at_restart]}, oracle rebase_restart ${O[rebase_restart]} (ambiguous ${P[ambiguous]}, count_wraps ${P[count_wraps]})")
    ((O[rebase_irq] + O[rebase_restart] >= P[rebased_in_handler] + P[rebased_at_restart] + P[count_wraps])) ||
        fails+=("re-bases: oracle ${O[rebase_irq]} + ${O[rebase_restart]} < pmustress ${P[rebased_in_handler]} + ${P[rebased_at_restart]} + count_wraps ${P[count_wraps]}")
    # Stops: every stop of a running counting event that the judge saw is one of the
    # driver's armpmu_stop calls. The driver's count has more: each event's last stop
    # when pmustress closes it (one per worker, after the last record), and in reset
    # mode the handler's DISABLE at every signal (no witness record; two overflows
    # whose signals the kernel merged make one). Nothing else stops an event in
    # the guest.
    local workers mode extra needed witnesses
    workers=$(jq -r '.[0].run.config.workers // "missing"' "$report" 2>/dev/null || echo missing)
    witnesses=$(jq -r '[.[0].run.workers[].switch_witness] | unique | join(",")' "$report" 2>/dev/null || echo missing)
    mode=$(jq -r '.[0].run.config.mode // "missing"' "$report" 2>/dev/null || echo missing)
    needed=$(jq -r '.[0].run.judge.stops_needed // "missing"' "$report" 2>/dev/null || echo missing)
    # A throttled event is stopped by perf's core and restarted by its tick,
    # outside the witness's records: the count is exact only without throttling.
    # (No case throttles: throttled is checked against the oracle above.) Without
    # the count witness the judge sees stops only by time, or not at all.
    if ((O[throttled] > 0)) || [[ $witnesses != counts ]]; then
        :
    elif [[ $workers =~ ^[0-9]+$ && $mode =~ ^(free|reset)$ && $signals =~ ^[0-9]+$ ]]; then
        extra=$workers
        [[ $mode == free ]] || extra=$((workers + signals))
        ((O[stops] == P[stops] + extra)) ||
            fails+=("stops ${P[stops]} + $extra (one final stop per worker$([[ $mode == reset ]] && echo ", one per signal")) != oracle stops ${O[stops]}")
    else
        fails+=("run.json has no config.workers/config.mode or totals.signals")
    fi
    # Never clean where the driver had an overflow without an interrupt, whatever
    # the witness (on the fixed kernel: an overdue overflow it did not deliver).
    without=${O[overdue_at_stop]}
    [[ $KERNEL != fixed ]] || without=${O[lost]}
    if [[ $exit_code == 0 ]] && ((without > 0)); then
        fails+=("exit code 0 (clean) where the driver had $without overflows without an interrupt")
    fi
    if [[ $exit_code =~ ^[0-9]+$ ]]; then
        if ((inj)); then
            # A self-test passes where the drops found are exactly those it made
            # (the driver lost nothing) and fails where the driver lost some too.
            if ((without == 0)); then
                [[ $exit_code == 0 && $run_verdict == self-test-passed ]] ||
                    fails+=("exit code $exit_code, $run_verdict: a self-test where the driver lost nothing, want 0, self-test-passed")
            else
                [[ $exit_code == 1 && $run_verdict == self-test-failed ]] ||
                    fails+=("exit code $exit_code, $run_verdict: a self-test where the driver lost $without, want 1, self-test-failed")
            fi
        elif ((P[dropped] > 0)); then
            ((exit_code == 1)) || fails+=("exit code $exit_code with ${P[dropped]} dropped, want 1")
        elif ((P[ambiguous] == 0)); then
            # Clean needs enough witnessed stops as well as overflows: below the
            # rule's count the answer is inconclusive (125), whatever the oracle saw.
            if [[ ! $needed =~ ^[0-9]+$ ]]; then
                fails+=("run.json has no judge.stops_needed")
            elif ((P[stops] >= needed)); then
                ((exit_code == 0)) || fails+=("exit code $exit_code with nothing dropped and ${P[stops]} >= $needed stops, want 0")
            else
                ((exit_code == 125)) || fails+=("exit code $exit_code with ${P[stops]} < $needed stops, want 125")
            fi
        fi
    fi
}

# ---------------------------------------------------------------------------------------

REPORTED=()
CASES=()
OUT=""
SUMMARY="" TSV=""
# Boots at once. Under -icount QEMU runs all of a guest's vCPUs on one host thread,
# and guest time is executed instructions, not host time: two boots use both CPUs of
# a 2-CPU machine and neither guest sees the other (the checks are against the
# oracle's own counts of the same boot either way).
LANES=${PMUSTRESS_QEMU_LANES:-2}
LANE_PIDS=() LANE_CASES=()

# await_kernel PID NAME LOG PATH VAR: waits for the background kernel build PID (a
# child of this shell) and sets VAR to the Image it made ($OUT/PATH's last line);
# if it failed, lets the running cases finish, shows $OUT/LOG.log's tail and dies.
await_kernel() {
    local pid=$1 name=$2 log=$OUT/$3.log
    if ! wait "$pid"; then
        while ((${#LANE_PIDS[@]})); do finish_oldest || true; done
        tail -n 30 "$log" >&2
        die "building the $name failed (see $log)"
    fi
    printf -v "$5" '%s' "$(tail -n1 "$OUT/$4")"
    log "$name: ${!5}"
}

# start_case NAME: run_case in the background, its output and its summary and
# runs.tsv lines kept in $OUT/lanes/ until finish_oldest prints and adds them.
start_case() {
    local c=$1
    mkdir -p "$OUT/lanes"
    (SUMMARY=$OUT/lanes/$c.summary TSV=$OUT/lanes/$c.tsv run_case "$c" || exit 1) \
        >"$OUT/lanes/$c.out" &
    LANE_PIDS+=($!)
    LANE_CASES+=("$c")
}

# finish_oldest: waits for the case started first of those still going, prints its
# lines whole (cases print in the order they were started) and adds its rows; fails
# when the case did.
finish_oldest() {
    local c=${LANE_CASES[0]} pid=${LANE_PIDS[0]} rc=0
    LANE_CASES=("${LANE_CASES[@]:1}")
    LANE_PIDS=("${LANE_PIDS[@]:1}")
    wait "$pid" || rc=$?
    cat "$OUT/lanes/$c.out"
    cat "$OUT/lanes/$c.summary" >>"$SUMMARY" 2>/dev/null || true
    cat "$OUT/lanes/$c.tsv" >>"$TSV" 2>/dev/null || true
    if ! grep -qE "^(PASS|FAIL) $c:" "$OUT/lanes/$c.out"; then
        printf 'FAIL %s: stopped before its verdict (exit %s), see the log above\n' "$c" "$rc" |
            tee -a "$SUMMARY"
        rc=1
    fi
    REPORTED+=("$c")
    ((rc == 0))
}

# On any exit, a FAIL line for every requested case that has none yet (setup failed).
report_unfinished() {
    local rc=$? c r done_
    for c in "${CASES[@]}"; do
        done_=0
        for r in "${REPORTED[@]}"; do
            [[ $r == "$c" ]] && done_=1
        done
        if ((!done_)); then
            printf 'FAIL %s: not run: setup failed (exit %s), see the log above%s\n' "$c" "$rc" \
                "${OUT:+ and $OUT}"
            REPORTED+=("$c")
        fi
    done
    exit "$rc"
}

main() {
    local c need_oracle=0 need_debian=0 need_fixed=0 need_faulty=0 kernel_pid="" fixed_pid=""
    local faulty_pid="" need_skid=0 skid_pid="" start=$SECONDS
    local failed=0 k order=()
    SRC=${PMUSTRESS_SRC:-$(cd "$QEMU_DIR/.." && pwd)}
    OUT=""
    while (($#)); do
        case $1 in
        --src) SRC=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --list) printf '%s\n' "${ALL_CASES[@]}"; exit 0 ;;
        -h | --help) usage; exit 0 ;;
        all) CASES+=("${ALL_CASES[@]}"); shift ;;
        -*) usage >&2; exit 2 ;;
        *) define_case "$1" || { echo "unknown case $1" >&2; usage >&2; exit 2; }
            CASES+=("$1"); shift ;;
        esac
    done
    ((${#CASES[@]})) || { usage >&2; exit 2; }
    [[ $(id -u) == 0 ]] || die "run as root (apt-get)"
    OUT=${OUT:-$CACHE/results/$(date +%Y%m%d-%H%M%S)}
    mkdir -p "$OUT" "$CACHE/debs"
    OUT=$(cd "$OUT" && pwd)
    SUMMARY=$OUT/summary TSV=$OUT/runs.tsv
    : >"$SUMMARY"
    {
        printf 'case\trun\texit\tverdict\tguest_s\twall_s'
        for k in samples on_time late rebased_in_handler dropped rebased_at_restart \
            ambiguous throttled injected stops count_wraps; do
            printf '\t%s' "$k"
        done
        printf '\toverflows\trecord_lost'
        for k in "${ORACLE_COUNTERS[@]}" "${FIXED_ORACLE_COUNTERS[@]}"; do
            printf '\toracle_%s' "$k"
        done
        printf '\tresult\n'
    } >"$TSV"
    log "results in $OUT"
    trap report_unfinished EXIT

    for c in "${CASES[@]}"; do
        define_case "$c"
        [[ $KERNEL == oracle || $KERNEL == fixed || $KERNEL == faulty ]] && need_oracle=1
        [[ $KERNEL == fixed ]] && need_fixed=1
        [[ $KERNEL == faulty ]] && need_faulty=1
        [[ $KERNEL == debian ]] && need_debian=1
        [[ -n $SKID ]] && need_skid=1
    done
    install_host_packages
    if ((need_skid)); then
        log "building the skidding QEMU in the background (log: $OUT/build-qemu.log)"
        "$QEMU_DIR/build-qemu.sh" >"$OUT/qemu-path" 2>"$OUT/build-qemu.log" &
        skid_pid=$!
    fi
    if ((need_oracle)); then
        # The kernel build takes minutes: run it beside everything else.
        log "building the oracle kernel in the background (log: $OUT/build-kernel.log)"
        "$QEMU_DIR/build-kernel.sh" oracle >"$OUT/kernel-path" 2>"$OUT/build-kernel.log" &
        kernel_pid=$!
    fi
    fetch_busybox
    ((need_oracle)) && build_tester
    ((need_debian)) && fetch_debian_kernel
    build_pmustress
    build_host_pmustress
    log "setup done in $((SECONDS - start)) s"

    # Cases on the Debian kernel first: they do not wait for the kernel build. Then
    # the oracle's, once it is built; $LANES boots at a time.
    for c in "${CASES[@]}"; do
        define_case "$c"
        [[ $KERNEL == debian ]] && order+=("$c")
    done
    for c in "${CASES[@]}"; do
        define_case "$c"
        [[ $KERNEL == oracle && -z $SKID ]] && order+=("$c")
    done
    # Then the fixed kernel's: built from the oracle kernel's kept trees (a minute or
    # two, beside the oracle's boots; build-kernel.sh), so after the oracle kernel.
    for c in "${CASES[@]}"; do
        define_case "$c"
        [[ $KERNEL == fixed ]] && order+=("$c")
    done
    # The faulty kernel's: built from the same trees, after the fixed one. Then the
    # skidding QEMU's, built beside everything before them.
    for c in "${CASES[@]}"; do
        define_case "$c"
        [[ $KERNEL == faulty ]] && order+=("$c")
    done
    for c in "${CASES[@]}"; do
        define_case "$c"
        [[ $KERNEL == oracle && -n $SKID ]] && order+=("$c")
    done
    for c in "${order[@]}"; do
        ((${#LANE_PIDS[@]} < LANES)) || finish_oldest || failed=1
        define_case "$c"
        if [[ $KERNEL != debian && -n $kernel_pid ]]; then
            await_kernel "$kernel_pid" "oracle kernel" build-kernel kernel-path ORACLE_IMAGE
            kernel_pid=""
            if ((need_fixed)); then
                log "building the fixed kernel in the background (log: $OUT/build-fixed-kernel.log)"
                "$QEMU_DIR/build-kernel.sh" fixed >"$OUT/fixed-kernel-path" \
                    2>"$OUT/build-fixed-kernel.log" &
                fixed_pid=$!
            fi
            # The kernel lock makes it wait for the fixed kernel's: both patch the
            # oracle's kept source in place.
            if ((need_faulty)); then
                log "building the faulty kernel in the background (log: $OUT/build-faulty-kernel.log)"
                "$QEMU_DIR/build-kernel.sh" faulty >"$OUT/faulty-kernel-path" \
                    2>"$OUT/build-faulty-kernel.log" &
                faulty_pid=$!
            fi
        fi
        if [[ $KERNEL == fixed && -n $fixed_pid ]]; then
            await_kernel "$fixed_pid" "fixed kernel" build-fixed-kernel fixed-kernel-path FIXED_IMAGE
            fixed_pid=""
        fi
        if [[ -n $SKID && -n $skid_pid ]]; then
            await_kernel "$skid_pid" "skidding QEMU" build-qemu qemu-path SKID_QEMU
            skid_pid=""
        fi
        if [[ $KERNEL == faulty && -n $faulty_pid ]]; then
            await_kernel "$faulty_pid" "faulty kernel" build-faulty-kernel faulty-kernel-path FAULTY_IMAGE
            faulty_pid=""
        fi
        start_case "$c"
    done
    while ((${#LANE_PIDS[@]})); do finish_oldest || failed=1; done
    log "total $((SECONDS - start)) s; results in $OUT (runs.tsv: every run's numbers)"
    return "$failed"
}

main "$@"
