#!/bin/bash
# Known-answer tests of pmustress on Linux's real arm64 PMU driver, under QEMU.
#
#   qemu/run.sh [--src DIR] [--out DIR] CASE...     (or: all, or --list)
#
# On a Debian 12 x86_64 machine, as root: installs what it needs, cross-builds pmustress
# as a static aarch64 binary, boots each case's kernel with an initramfs that runs one
# pmustress command, brings the result directory back over the serial console and checks
# the known answer. Prints one PASS/FAIL line per case; exits 0 only if all passed.
# See qemu/README.md.
#
# Environment:
#   PMUSTRESS_QEMU_CACHE    cache directory (default ~/.cache/pmustress-qemu)
#   PMUSTRESS_SRC           pmustress source tree (default: the repository holding this script)
#   PMUSTRESS_QEMU_BIN      use this prebuilt static aarch64 binary instead of building
#   PMUSTRESS_QEMU_TIMEOUT  host-side timeout per boot in seconds (default 900)
#   PMUSTRESS_DEBIAN_KERNEL Debian kernel package (default: newest linux-image-6.1.0-NN-arm64-unsigned)
#   PMUSTRESS_QEMU_CPU      qemu -cpu value (default max,pauth-impdef=on)
#   PMUSTRESS_QEMU_ICOUNT   qemu -icount value (default shift=0,sleep=off)
#   PMUSTRESS_QEMU_DURATION budget of the run cases in guest time (default 4s)
#   PMUSTRESS_QEMU_GUEST_TIMEOUT guest-side limit on one pmustress command (default 30 s)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ALL_CASES=(debian61-migrate branches-125 nopnmi-migrate pnmi-migrate nopnmi-nomigrate pnmi-inject)

# The budget shared by the migration cases (1, 2 and 4): guest time, measured by the
# guest's CLOCK_MONOTONIC, which -icount shift=0 ties to executed instructions. See
# qemu/README.md for the measurements behind it.
BUDGET=(--duration "${PMUSTRESS_QEMU_DURATION:-4s}")
COMMON=(--workers 1 --event cycles --period 100000)
TIMEOUT=${PMUSTRESS_QEMU_TIMEOUT:-900}
# pauth-impdef=on: the same CPU features as plain "max", but QEMU computes pointer
# authentication codes with a cheap hash instead of QARMA. Debian's kernel signs every
# function return, and with plain "max" it boots in ~25 s instead of ~7 s and runs the
# 2 guest-second case ~6x slower. The small kernel has PTR_AUTH off; drops reproduce
# the same way on both settings (qemu/README.md).
QEMU_CPU=${PMUSTRESS_QEMU_CPU:-max,pauth-impdef=on}
# shift=0: one instruction per guest nanosecond, which makes the emulated cycle counter
# exact. sleep=off: an idle vCPU jumps to its next timer instead of waiting in host
# time, so guest timing does not depend on how busy the host is (with sleep=on a loaded
# host gave the unmigrated case late/early signal pairs in 3 of 5 runs, sleep=off none).
QEMU_ICOUNT=${PMUSTRESS_QEMU_ICOUNT:-shift=0,sleep=off}
# The unmigrated cases keep every pmustress thread on vCPU 0. QEMU's cycle counter is
# virtual time, which also runs while the other vCPU executes: with pmustress's own
# controller thread waking there, the worker's overflow interrupts came ~45,000 cycles
# late in 7 of 10 runs (36-45 `late` windows each; interrupts, not losses), and 0 of 10
# once pinned. What the case tests, no migration, is the same either way.
PIN_ALL="taskset -c 0"
# Guest-side limit (guest seconds) on one pmustress command, so a hung run still reports.
GUEST_TIMEOUT=${PMUSTRESS_QEMU_GUEST_TIMEOUT:-30}

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    echo "Cases: ${ALL_CASES[*]}"
}

# Each case sets: KERNEL (small|debian), APPEND (extra kernel parameters), WRAP (a
# command the guest runs pmustress under, or empty), ARGS (the pmustress run arguments) and the expectations EXPECT_EXIT, EXPECT_VERDICT,
# EXPECT_DROPPED (some|none|injected: exactly the injected ones|any), EXPECT_CLEAN (1: no
# anomaly of any kind),
# EXPECT_NMI_EVIDENCE (1: an evidence line says "using NMIs"), EXPECT_MESSAGE (regex
# the output must match, or empty).
define_case() {
    WRAP="" KERNEL=small APPEND="" ARGS=() EXPECT_EXIT="" EXPECT_VERDICT="" EXPECT_DROPPED=any
    EXPECT_CLEAN=0 EXPECT_NMI_EVIDENCE=0 EXPECT_MESSAGE=""
    case $1 in
    nopnmi-migrate) # 1: pseudo-NMI built but not enabled: the overflow interrupt is lost
        ARGS=(run "${COMMON[@]}" --migrate ping-pong "${BUDGET[@]}")
        EXPECT_EXIT=1 EXPECT_VERDICT=disabled EXPECT_DROPPED=some ;;
    pnmi-migrate) # 2: the same kernel booted with pseudo-NMIs: no interrupt is lost
        APPEND=irqchip.gicv3_pseudo_nmi=1
        ARGS=(run "${COMMON[@]}" --migrate ping-pong "${BUDGET[@]}")
        EXPECT_EXIT=0 EXPECT_VERDICT=enabled EXPECT_DROPPED=none EXPECT_NMI_EVIDENCE=1 ;;
    nopnmi-nomigrate) # 3: no migration, no anomaly of any kind
        WRAP=$PIN_ALL
        ARGS=(run "${COMMON[@]}" --migrate none "${BUDGET[@]}")
        EXPECT_EXIT=0 EXPECT_VERDICT=disabled EXPECT_DROPPED=none EXPECT_CLEAN=1 ;;
    pnmi-inject) # the detector on the real driver: pseudo-NMIs on, every 97th overflow
        # discarded on purpose; exactly those come back as dropped interrupts, among
        # the late signals and late interrupts migration brings here
        APPEND=irqchip.gicv3_pseudo_nmi=1
        ARGS=(run "${COMMON[@]}" --migrate ping-pong --inject-drop-every 97 "${BUDGET[@]}")
        EXPECT_EXIT=1 EXPECT_VERDICT=enabled EXPECT_DROPPED=injected ;;
    pnmi-nomigrate) # extra control, not in "all": pseudo-NMIs on, no migration
        APPEND=irqchip.gicv3_pseudo_nmi=1 WRAP=$PIN_ALL
        ARGS=(run "${COMMON[@]}" --migrate none "${BUDGET[@]}")
        EXPECT_EXIT=0 EXPECT_VERDICT=enabled EXPECT_DROPPED=none EXPECT_CLEAN=1 EXPECT_NMI_EVIDENCE=1 ;;
    debian61-migrate) # 4: Debian's stock 6.1 kernel (no CONFIG_ARM64_PSEUDO_NMI)
        KERNEL=debian
        ARGS=(run "${COMMON[@]}" --migrate ping-pong "${BUDGET[@]}")
        EXPECT_EXIT=1 EXPECT_VERDICT=not-built EXPECT_DROPPED=some ;;
    branches-125) # 5: QEMU's PMU has no branch event: cannot test here
        ARGS=(run --workers 1 --duration 1s)
        EXPECT_EXIT=125 EXPECT_MESSAGE='cpu_cycles' ;;
    *) return 1 ;;
    esac
}

# ---------------------------------------------------------------------------------------
# Host setup

install_host_packages() {
    ensure_arm64_arch
    ensure_pkgs qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross cpio jq gzip \
        coreutils
}

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

# Download an arm64 package ($1) into the cache, unpack it, print the unpacked directory.
fetch_arm64_deb() {
    local pkg=$1 ver dir tmp
    ver=$(apt-cache policy "$pkg:arm64" | sed -n 's/^ *Candidate: //p')
    if [[ -z $ver || $ver == "(none)" ]]; then
        apt_update
        ver=$(apt-cache policy "$pkg:arm64" | sed -n 's/^ *Candidate: //p')
    fi
    [[ -n $ver && $ver != "(none)" ]] || die "apt knows no $pkg:arm64"
    dir=$CACHE/debs/${pkg}_${ver//[:~]/_}
    if [[ ! -d $dir/root ]]; then
        log "apt-get download $pkg:arm64=$ver"
        tmp=$(mktemp -d "$CACHE/debs/tmp.XXXXXX")
        (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg:arm64=$ver" >&2)
        dpkg-deb -x "$tmp"/*.deb "$tmp/root"
        rm -f "$tmp"/*.deb
        rm -rf "$dir"
        mv "$tmp" "$dir"
    fi
    printf '%s\n' "$dir/root"
}

fetch_busybox() {
    local root
    root=$(fetch_arm64_deb busybox-static)
    [[ -x $root/bin/busybox ]] || die "no bin/busybox in busybox-static:arm64"
    BUSYBOX=$root/bin/busybox
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

# Cross-build pmustress; sets PMUSTRESS_BIN.
build_pmustress() {
    if [[ -n ${PMUSTRESS_QEMU_BIN:-} ]]; then
        PMUSTRESS_BIN=$PMUSTRESS_QEMU_BIN
        log "using prebuilt $PMUSTRESS_BIN"
        return
    fi
    local src=$SRC cargo rustc target_dir start=$SECONDS
    [[ -f $src/Cargo.toml ]] || die "no Cargo.toml in $src"
    if command -v rustup >/dev/null &&
        rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
        cargo=cargo rustc=rustc target_dir=$CACHE/target-rustup
    else
        ensure_pkgs rustc-web cargo-web libstd-rust-web-dev:arm64
        cargo=/usr/bin/cargo rustc=/usr/bin/rustc target_dir=$CACHE/target-debian
    fi
    log "cross-building pmustress from $src with $("$rustc" --version)"
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
        RUSTFLAGS="-C target-feature=+crt-static" RUSTC=$rustc \
        nice -n 5 "$cargo" build --release --locked --quiet \
        --manifest-path "$src/Cargo.toml" --target aarch64-unknown-linux-gnu \
        --target-dir "$target_dir" >&2
    PMUSTRESS_BIN=$target_dir/aarch64-unknown-linux-gnu/release/pmustress
    [[ -x $PMUSTRESS_BIN ]] || die "cargo built no $PMUSTRESS_BIN"
    log "pmustress built in $((SECONDS - start)) s"
}

# ---------------------------------------------------------------------------------------
# Guest

# The init script for one case; $1 is the pmustress command line, already quoted.
write_init() {
    cat <<EOF
#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
# Keep the kernel's messages off the console from here on: they are saved below.
echo 1 > /proc/sys/kernel/printk
echo "@@PMUSTRESS-INIT@@ \$(cat /proc/uptime)"
R=/tmp/result
mkdir -p \$R
# Stop the kernel's dynamic throttling (order matters: the rate cannot be written once
# the percentage is 0). pmustress must still detect any throttling that happens.
echo 100000 > /proc/sys/kernel/perf_event_max_sample_rate
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent
for f in perf_event_max_sample_rate perf_cpu_time_max_percent perf_event_paranoid; do
    echo "\$f \$(cat /proc/sys/kernel/\$f)"
done > \$R/sysctl-before
uname -a > \$R/uname
ulimit -a > \$R/ulimit 2>&1
cat /proc/cmdline > \$R/cmdline
/pmustress env --json > \$R/env.json 2> \$R/env.stderr
echo \$? > \$R/env.exit
echo "@@PMUSTRESS-RUN-START@@ \$(cat /proc/uptime)"
cat /proc/uptime > \$R/uptime-start
timeout -s KILL $GUEST_TIMEOUT $1 > \$R/stdout 2> \$R/stderr
echo \$? > \$R/exit_code
cat /proc/uptime > \$R/uptime-end
echo "@@PMUSTRESS-RUN-END@@ \$(cat /proc/uptime)"
for f in perf_event_max_sample_rate perf_cpu_time_max_percent; do
    echo "\$f \$(cat /proc/sys/kernel/\$f)"
done > \$R/sysctl-after
cat /proc/interrupts > \$R/interrupts
dmesg > \$R/dmesg
echo "--- pmustress stdout"; cat \$R/stdout
echo "--- pmustress stderr"; cat \$R/stderr
echo "--- exit code \$(cat \$R/exit_code)"
echo "@@PMUSTRESS-RESULT-BEGIN@@"
tar -C /tmp -czf - result | base64
echo "@@PMUSTRESS-RESULT-END@@"
echo o > /proc/sysrq-trigger
sleep 10
EOF
}

# make_initramfs OUTFILE COMMAND [BOOT_CONFIG RELEASE]
make_initramfs() {
    local out=$1 cmd=$2 stage
    stage=$(mktemp -d)
    mkdir -p "$stage/bin" "$stage/boot"
    cp "$BUSYBOX" "$stage/bin/busybox"
    cp "$PMUSTRESS_BIN" "$stage/pmustress"
    if [[ -n ${3:-} ]]; then
        # Where a Debian system keeps its kernel's config.
        cp "$3" "$stage/boot/config-$4"
    fi
    write_init "$cmd" >"$stage/init"
    chmod 755 "$stage/init" "$stage/pmustress"
    (cd "$stage" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -1 >"$out"
    rm -rf "$stage"
}

# Copy qemu's console to stdout, writing "MARKER LINE... HOST_SECONDS" for marker lines.
stamp_markers() {
    local marks=$1 line
    while IFS= read -r line; do
        line=${line%$'\r'}
        printf '%s\n' "$line"
        if [[ $line == *@@PMUSTRESS-* ]]; then
            printf '%s %s\n' "$line" "$EPOCHREALTIME" >>"$marks"
        fi
    done
}

# Host time at which marker $2 was seen in marks file $1.
mark_time() {
    awk -v m="$2" '$1 == m { print $NF; exit }' "$1"
}

# Guest uptime printed with marker $2.
mark_uptime() {
    awk -v m="$2" '$1 == m { print $2; exit }' "$1"
}

# run_case NAME: boots the case, leaves everything in $OUT/NAME, prints PASS/FAIL.
run_case() {
    local name=$1 dir image initrd cmd append qemu_rc t0 t1 marks
    define_case "$name"
    dir=$OUT/$name
    rm -rf "$dir"
    mkdir -p "$dir"
    initrd=$dir/initrd.gz
    cmd="${WRAP:+$WRAP }/pmustress $(printf '%q ' "${ARGS[@]}")--out /tmp/result/run"
    cmd=${cmd% }
    if [[ $KERNEL == debian ]]; then
        image=$DEBIAN_IMAGE
        make_initramfs "$initrd" "$cmd" "$DEBIAN_CONFIG" "$DEBIAN_RELEASE"
    else
        image=$SMALL_IMAGE
        make_initramfs "$initrd" "$cmd"
    fi
    append="console=ttyAMA0 panic=-1 $APPEND"
    append=${append% }
    marks=$dir/marks
    : >"$marks"
    printf '%s\n' "kernel $image" "append $append" "cpu $QEMU_CPU" "icount $QEMU_ICOUNT" "command $cmd" >"$dir/boot.txt"
    log "$name: booting ($KERNEL kernel${APPEND:+, $APPEND}): $cmd"
    t0=$EPOCHREALTIME
    set +e
    timeout -k 10 "$TIMEOUT" qemu-system-aarch64 -M virt,gic-version=3 -cpu "$QEMU_CPU" -smp 2 \
        -m 1024 -nographic -no-reboot -nic none -icount "$QEMU_ICOUNT" \
        -kernel "$image" -initrd "$initrd" -append "$append" </dev/null 2>&1 |
        stamp_markers "$marks" >"$dir/console.log"
    qemu_rc=${PIPESTATUS[0]}
    set -e
    t1=$EPOCHREALTIME
    rm -f "$initrd"
    echo "$t0 $t1 $qemu_rc" >"$dir/host-times"
    sed -n '/^@@PMUSTRESS-RESULT-BEGIN@@/,/^@@PMUSTRESS-RESULT-END@@/{/^@@/d;p}' \
        "$dir/console.log" >"$dir/result.b64"
    if [[ -s $dir/result.b64 ]] && base64 -d "$dir/result.b64" | tar -xz -C "$dir"; then
        rm -f "$dir/result.b64"
    fi
    check_case "$name" "$dir" "$qemu_rc" "$t0" "$t1"
}

# ---------------------------------------------------------------------------------------
# Known answers

jqr() { jq -r "$1" "$2" 2>/dev/null || echo "?"; }

check_case() {
    local name=$1 dir=$2 qemu_rc=$3 t0=$4 t1=$5 r json fails=() exit_code verdict
    local signals dropped anomalies nmi_ev msg boot wall run_wall guest figures throttled
    local implied samples lost
    r=$dir/result
    json=$r/run/run.json
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    boot=$(awk -v a="$t0" -v b="$(mark_time "$dir/marks" @@PMUSTRESS-INIT@@)" \
        'BEGIN { if (b == "") print "?"; else printf "%.1f", b - a }')
    run_wall=$(awk -v a="$(mark_time "$dir/marks" @@PMUSTRESS-RUN-START@@)" \
        -v b="$(mark_time "$dir/marks" @@PMUSTRESS-RUN-END@@)" \
        'BEGIN { if (a == "" || b == "") print "?"; else printf "%.1f", b - a }')
    guest=$(awk -v a="$(mark_uptime "$dir/marks" @@PMUSTRESS-RUN-START@@)" \
        -v b="$(mark_uptime "$dir/marks" @@PMUSTRESS-RUN-END@@)" \
        'BEGIN { if (a == "" || b == "") print "?"; else printf "%.2f", b - a }')

    if [[ ! -f $r/exit_code ]]; then
        if ((qemu_rc == 124 || qemu_rc == 137)); then
            fails+=("timed out after ${TIMEOUT}s")
        else
            fails+=("no result came back (qemu exit $qemu_rc)")
        fi
        exit_code="?"
    else
        exit_code=$(<"$r/exit_code")
        [[ $exit_code == "$EXPECT_EXIT" ]] || fails+=("exit code $exit_code, want $EXPECT_EXIT")
    fi

    signals="-" dropped="-" anomalies="-" verdict="-" throttled="-" implied="-" samples="-"
    lost="-"
    if [[ -f $json ]]; then
        signals=$(jqr '.totals.signals // "missing"' "$json")
        dropped=$(jqr '.totals.anomalies["dropped-interrupt"] // 0' "$json")
        anomalies=$(jqr '.totals.anomalies // {} | to_entries | map(select(.value != 0) |
            "\(.key)=\(.value)") | join(",") | if . == "" then "none" else . end' "$json")
        throttled=$(jqr '.totals.throttle_records // "missing"' "$json")
        implied=$(jqr '.totals.implied_overflows // "missing"' "$json")
        samples=$(jqr '.totals.kernel_samples // "missing"' "$json")
        lost=$(jqr '.totals.dropped_interrupts // "missing"' "$json")
        verdict=$(jqr '.fingerprint.pseudo_nmi.verdict // "missing"' "$json")
        nmi_ev=$(jqr '[.fingerprint.pseudo_nmi.evidence[]? | select(test("using NMIs"))] | length' "$json")
        local status
        status=$(jqr '.exit_status // "missing"' "$json")
        [[ $exit_code == "?" || $status == "$exit_code" ]] ||
            fails+=("run.json exit_status $status but the process exited $exit_code")
        [[ -z $EXPECT_VERDICT || $verdict == "$EXPECT_VERDICT" ]] ||
            fails+=("pseudo-NMI verdict $verdict, want $EXPECT_VERDICT")
        case $EXPECT_DROPPED in
        some) [[ $dropped =~ ^[0-9]+$ ]] && ((dropped > 0)) ||
            fails+=("no dropped-interrupt reported: raise the budget, do not weaken the test")
            # Independent of the classifier: the kernel's ring must really lack sample
            # records for some of the overflows the final count implies.
            [[ $implied =~ ^[0-9]+$ && $samples =~ ^[0-9]+$ ]] && ((implied > samples)) ||
                fails+=("kernel samples $samples not fewer than implied overflows $implied") ;;
        none) [[ $dropped == 0 ]] || fails+=("dropped-interrupt $dropped, want 0") ;;
        injected)
            local injected
            injected=$(jqr '.totals.injected // "missing"' "$json")
            [[ $injected =~ ^[0-9]+$ ]] && ((injected > 0)) && [[ $lost == "$injected" ]] ||
                fails+=("dropped interrupts $lost, want exactly the $injected injected") ;;
        esac
        if ((EXPECT_CLEAN)) && [[ $anomalies != none ]]; then
            fails+=("anomalies $anomalies, want none")
        fi
        if ((EXPECT_NMI_EVIDENCE)) && [[ $nmi_ev != [1-9]* ]]; then
            fails+=("no pseudo-NMI evidence line containing \"using NMIs\"")
        fi
        [[ $signals =~ ^[0-9]+$ ]] && ((signals > 0)) || fails+=("signals $signals")
    elif [[ $EXPECT_EXIT != 125 ]]; then
        fails+=("no run/run.json")
    fi
    if [[ -n $EXPECT_MESSAGE ]]; then
        msg=$(cat "$r/stdout" "$r/stderr" 2>/dev/null || true)
        grep -qiE "$EXPECT_MESSAGE" <<<"$msg" ||
            fails+=("output does not match /$EXPECT_MESSAGE/")
    fi

    figures="exit $exit_code, verdict $verdict, signals $signals, kernel samples $samples,"
    figures+=" implied overflows $implied, dropped-interrupt $dropped windows / $lost interrupts,"
    figures+=" anomalies $anomalies, throttle records $throttled, guest ${guest}s in ${run_wall}s,"
    figures+=" boot ${boot}s, wall ${wall}s"
    REPORTED+=("$name")
    if ((${#fails[@]} == 0)); then
        printf 'PASS %s: %s\n' "$name" "$figures" | tee -a "$OUT/summary"
        return 0
    fi
    local IFS=';'
    printf 'FAIL %s: %s; %s (see %s)\n' "$name" "${fails[*]}" "$figures" "$dir" |
        tee -a "$OUT/summary"
    return 1
}

# ---------------------------------------------------------------------------------------

REPORTED=()
CASES=()
OUT=""

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
    local c need_small=0 need_debian=0 kernel_pid="" start=$SECONDS failed=0
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
    : >"$OUT/summary"
    log "results in $OUT"
    trap report_unfinished EXIT

    for c in "${CASES[@]}"; do
        define_case "$c"
        [[ $KERNEL == small ]] && need_small=1
        [[ $KERNEL == debian ]] && need_debian=1
    done
    install_host_packages
    if ((need_small)); then
        # The kernel build takes minutes: run it beside everything else.
        log "building the small kernel in the background (log: $OUT/build-kernel.log)"
        "$QEMU_DIR/build-kernel.sh" >"$OUT/kernel-path" 2>"$OUT/build-kernel.log" &
        kernel_pid=$!
    fi
    fetch_busybox
    ((need_debian)) && fetch_debian_kernel
    build_pmustress
    log "setup done in $((SECONDS - start)) s"

    # Cases on the Debian kernel first: they do not wait for the kernel build.
    for c in "${CASES[@]}"; do
        define_case "$c"
        [[ $KERNEL == debian ]] || continue
        run_case "$c" || failed=1
    done
    if [[ -n $kernel_pid ]]; then
        if ! wait "$kernel_pid"; then
            tail -n 30 "$OUT/build-kernel.log" >&2
            die "building the small kernel failed (see $OUT/build-kernel.log)"
        fi
        SMALL_IMAGE=$(tail -n1 "$OUT/kernel-path")
        log "small kernel: $SMALL_IMAGE"
    fi
    for c in "${CASES[@]}"; do
        define_case "$c"
        [[ $KERNEL == small ]] || continue
        run_case "$c" || failed=1
    done
    log "total $((SECONDS - start)) s; results in $OUT"
    return "$failed"
}

main "$@"
