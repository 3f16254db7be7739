# shellcheck shell=bash
# Helpers shared by qemu/run.sh, qemu/build-kernel.sh, qemu/bisect-step.sh,
# qemu/bisect-known-answer.sh and scripts/dist.sh. Sourced, not executed.

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

# apt-get holding our own lock: run.sh installs the guest's toolchain while
# build-kernel.sh, in the background, installs the kernel's build dependencies, and two
# apt-gets at once make the second fail on dpkg's lock (seen on a fresh machine). The
# timeout waits out anyone else's apt (unattended-upgrades) the same way.
apt_get() {
    with_lock "$CACHE/apt.lock" apt-get -o DPkg::Lock::Timeout=900 "$@"
}

APT_UPDATED=${APT_UPDATED:-0}
apt_update() {
    if [[ $APT_UPDATED == 0 ]]; then
        log "apt-get update"
        apt_get update -q >&2
        APT_UPDATED=1
    fi
}

ensure_arm64_arch() {
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        log "dpkg --add-architecture arm64"
        with_lock "$CACHE/apt.lock" dpkg --add-architecture arm64
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
    apt_get install -y -q --no-install-recommends "${missing[@]}" >&2
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

# ---------------------------------------------------------------------------------------
# QEMU settings

# Host-side limit on one boot, seconds.
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
# Guest-side limit (guest seconds) on one pmustress command, so a hung run still reports.
GUEST_TIMEOUT=${PMUSTRESS_QEMU_GUEST_TIMEOUT:-30}
# The oracle's counters, in /sys/module/pmu_oracle/parameters/ (qemu/patches/oracle.patch).
ORACLE_COUNTERS=(lost handled throttled rebase_irq rebase_restart restart_overflowed stops
    overdue_at_stop irq_unhandled irq_in_update update_wrapped)
# Only on the fixed kernel (qemu/patches/fix-oracle.patch): the overdue overflows the
# fixed driver delivered late, and the flags its stops cleared (`lost` on the stock one).
FIXED_ORACLE_COUNTERS=(overdue_delivered flag_at_stop)

# ---------------------------------------------------------------------------------------
# Host setup

install_host_packages() {
    ensure_arm64_arch
    ensure_pkgs qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross cpio jq gzip \
        coreutils
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
        # bisect-step.sh on a cache run.sh never made has no debs/ yet.
        mkdir -p "$CACHE/debs"
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

# Cross-build pmustress for the guest (scripts/static-build.sh, as scripts/dist.sh
# builds the aarch64 release binary); sets PMUSTRESS_BIN.
build_pmustress() {
    if [[ -n ${PMUSTRESS_QEMU_BIN:-} ]]; then
        PMUSTRESS_BIN=$PMUSTRESS_QEMU_BIN
        log "using prebuilt $PMUSTRESS_BIN"
        return
    fi
    # Target directories $CACHE/target-rustup or $CACHE/target-debian.
    static_build aarch64 "$SRC" "$CACHE/target"
    PMUSTRESS_BIN=$STATIC_BIN
}

# pmustress for this machine, to read results back through its own checked
# reader (`pmustress report --format json`) instead of parsing run.json here;
# sets HOST_PMUSTRESS. PMUSTRESS_HOST_BIN names one already built (.ci/run passes
# scripts/dist.sh's: `cargo test` builds the binary with its dev-dependencies'
# features, so a plain `cargo build --release` after it builds everything again).
build_host_pmustress() {
    local start=$SECONDS target
    if [[ -n ${PMUSTRESS_HOST_BIN:-} ]]; then
        HOST_PMUSTRESS=$PMUSTRESS_HOST_BIN
        [[ -x $HOST_PMUSTRESS ]] || die "PMUSTRESS_HOST_BIN: $HOST_PMUSTRESS is not executable"
        log "reading results back with $HOST_PMUSTRESS ($("$HOST_PMUSTRESS" --version))"
        return
    fi
    nice -n 5 cargo build --release --locked --quiet --manifest-path "$SRC/Cargo.toml" >&2 ||
        die "cannot build pmustress for this machine from $SRC"
    target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$SRC/Cargo.toml" |
        jq -r .target_directory)
    HOST_PMUSTRESS=$target/release/pmustress
    [[ -x $HOST_PMUSTRESS ]] || die "cargo built no $HOST_PMUSTRESS"
    log "pmustress for this machine (the reader) ready in $((SECONDS - start)) s"
}

# read_run DIR OUT: the run in results directory DIR as `pmustress report
# --format json` gives it (its summary, and the whole run.json under "run")
# into OUT; prints why and fails when pmustress refuses the directory.
read_run() {
    # report exits 125 for a run that did not finish, and still prints it.
    "$HOST_PMUSTRESS" report --format json "$1" >"$2" 2>"$2.err" || true
    if [[ ! -s $2 ]]; then
        echo "pmustress report refused it: $(head -n1 "$2.err")"
        return 1
    fi
}

# The baseline tester (qemu/tester/counters.c: the original report's kind of counter
# test), static for aarch64, cached by its source's hash; sets TESTER_EXTRA to a
# directory for INITRAMFS_EXTRA holding /counters and /bed/tester (qemu/tester/tester.sh:
# the tester moved by the report's taskset loop, moving itself, or left alone).
build_tester() {
    local key dir
    key=$(cat "$QEMU_DIR/tester/counters.c" "$QEMU_DIR/tester/tester.sh" | sha256sum | cut -c1-16)
    dir=$CACHE/tester/$key
    if [[ ! -x $dir/counters ]]; then
        mkdir -p "$dir/bed"
        aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror -o "$dir/counters.tmp" \
            "$QEMU_DIR/tester/counters.c" || die "cannot build qemu/tester/counters.c"
        mv "$dir/counters.tmp" "$dir/counters"
    fi
    cp "$QEMU_DIR/tester/tester.sh" "$dir/bed/tester"
    chmod 755 "$dir/bed/tester"
    TESTER_EXTRA=$dir
}

# The oracle's counter $2 over the run in directory $1 (after - before), or "missing".
oracle_delta() {
    local d=$1 b a
    b=$(awk -v k="$2" '$1 == k { print $2 }' "$d/oracle-before" 2>/dev/null)
    a=$(awk -v k="$2" '$1 == k { print $2 }' "$d/oracle-after" 2>/dev/null)
    if [[ $b =~ ^[0-9]+$ && $a =~ ^[0-9]+$ ]]; then
        echo $((a - b))
    else
        echo missing
    fi
}

# The build itself, shared with scripts/dist.sh.
# shellcheck source-path=SCRIPTDIR source=../scripts/static-build.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/static-build.sh"

# ---------------------------------------------------------------------------------------
# Guest

# The init script's start: mounts, sysctls, the environment, and the shell function
# run_one NAME COMMAND... (one pmustress run, the oracle's counters read right before
# and after). The caller prints its run_one lines, then init_tail.
init_head() {
    local o
    o="${ORACLE_COUNTERS[*]} ${FIXED_ORACLE_COUNTERS[*]}"
    cat <<EOS
#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
# Keep the kernel's messages off the console from here on: they are saved below.
echo 1 > /proc/sys/kernel/printk
echo "@@PMUSTRESS-INIT@@ - \$(cat /proc/uptime)"
R=/tmp/result
mkdir -p \$R/runs
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
# The oracle kernel's counters (qemu/patches/oracle.patch), "name value" lines; nothing
# on a kernel without them.
O=/sys/module/pmu_oracle/parameters
oracle_read() {
    [ -d \$O ] || return 0
    for f in $o; do [ -e \$O/\$f ] && echo "\$f \$(cat \$O/\$f)"; done
    return 0
}
# run_one NAME COMMAND...: one pmustress run, the oracle read right before and after.
run_one() {
    n=\$1
    shift
    d=\$R/runs/\$n
    mkdir -p \$d
    echo "\$* --out \$d/run" > \$d/command
    cat /proc/interrupts > \$d/interrupts-before
    echo "@@PMUSTRESS-RUN-START@@ \$n \$(cat /proc/uptime)"
    cat /proc/uptime > \$d/uptime-start
    oracle_read > \$d/oracle-before
    "\$@" --out \$d/run > \$d/stdout 2> \$d/stderr &
    p=\$!
    t=0
    while kill -0 \$p 2>/dev/null && [ \$t -lt $((GUEST_TIMEOUT * 10)) ]; do
        sleep 0.1
        t=\$((t + 1))
    done
    if kill -0 \$p 2>/dev/null; then
        # Hung: where each thread is, for the report, before the kill.
        for task in /proc/\$p/task/*; do
            echo "\$task \$(cat \$task/comm) \$(cut -d' ' -f3,14,15 \$task/stat) wchan \$(cat \$task/wchan)"
            cat \$task/stack 2>/dev/null
        done > \$d/hung
        kill -KILL \$p
    fi
    wait \$p
    echo \$? > \$d/exit_code
    oracle_read > \$d/oracle-after
    cat /proc/uptime > \$d/uptime-end
    echo "@@PMUSTRESS-RUN-END@@ \$n \$(cat /proc/uptime)"
    cat /proc/interrupts > \$d/interrupts-after
    echo "--- \$n: \$(cat \$d/command)"
    cat \$d/stdout \$d/stderr
    [ -f \$d/hung ] && { echo "--- \$n: hung after ${GUEST_TIMEOUT} s, its threads:"; cat \$d/hung; }
    echo "--- \$n: exit code \$(cat \$d/exit_code)"
}
EOS
}

# The init script's end: save the rest, print the result directory on the console,
# power off.
init_tail() {
    cat <<EOS
for f in perf_event_max_sample_rate perf_cpu_time_max_percent; do
    echo "\$f \$(cat /proc/sys/kernel/\$f)"
done > \$R/sysctl-after
cat /proc/interrupts > \$R/interrupts
dmesg > \$R/dmesg
echo "@@PMUSTRESS-RESULT-BEGIN@@"
tar -C /tmp -czf - result | base64
echo "@@PMUSTRESS-RESULT-END@@"
echo o > /proc/sysrq-trigger
sleep 10
EOS
}

# make_initramfs OUTFILE [BOOT_CONFIG RELEASE]: busybox, $PMUSTRESS_BIN, the /init that
# the caller's write_init prints, and whatever is in the directory $INITRAMFS_EXTRA.
make_initramfs() {
    local out=$1 stage
    stage=$(mktemp -d)
    mkdir -p "$stage/bin" "$stage/boot"
    cp "$BUSYBOX" "$stage/bin/busybox"
    cp "$PMUSTRESS_BIN" "$stage/pmustress"
    if [[ -n ${2:-} ]]; then
        # Where a Debian system keeps its kernel's config.
        cp "$2" "$stage/boot/config-$3"
    fi
    if [[ -n ${INITRAMFS_EXTRA:-} ]]; then
        cp -a "$INITRAMFS_EXTRA/." "$stage/"
    fi
    write_init >"$stage/init"
    chmod 755 "$stage/init" "$stage/pmustress"
    (cd "$stage" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -1 >"$out"
    rm -rf "$stage"
}

# Copy qemu's console to stdout, writing "MARKER NAME UPTIME IDLE HOST_SECONDS" for
# marker lines.
stamp_markers() {
    local marks=$1 line
    while IFS= read -r line; do
        line=${line%$'\r'}
        printf '%s\n' "$line"
        if [[ $line == @@PMUSTRESS-* ]]; then
            printf '%s %s\n' "$line" "$EPOCHREALTIME" >>"$marks"
        fi
    done
}

# mark_field MARKS MARKER NAME FIELD: field FIELD (host|uptime) of marker MARKER for NAME.
mark_field() {
    awk -v m="$2" -v n="$3" -v f="$4" \
        '$1 == m && $2 == n { print (f == "host" ? $NF : $3); exit }' "$1"
}

# boot_guest DIR IMAGE SMP APPEND INITRD: boot IMAGE under qemu ($QEMU_BIN, default the
# machine's qemu-system-aarch64; with $SKID set, the QEMU that skids, $SKID_QEMU, with
# PMUSTRESS_QEMU_SKID=$SKID; host-side $TIMEOUT), the
# console in DIR/console.log, the init's markers in DIR/marks, "T0 T1 QEMU_RC" in
# DIR/host-times; unpack the result directory the init printed into DIR/result.
# Sets QEMU_RC, BOOT_WALL (qemu's wall seconds) and BOOT_SECONDS (wall seconds to /init,
# "?" if it never got there).
boot_guest() {
    local dir=$1 image=$2 smp=$3 append=$4 initrd=$5 t0 t1
    local qemu=(env "${QEMU_BIN:-qemu-system-aarch64}")
    [[ -z ${SKID:-} ]] || qemu=(env PMUSTRESS_QEMU_SKID="$SKID" "$SKID_QEMU")
    : >"$dir/marks"
    t0=$EPOCHREALTIME
    set +e
    timeout -k 10 "$TIMEOUT" "${qemu[@]}" -M virt,gic-version=3 -cpu "$QEMU_CPU" \
        -smp "$smp" -m 1024 -nographic -no-reboot -nic none -icount "$QEMU_ICOUNT" \
        -kernel "$image" -initrd "$initrd" -append "$append" </dev/null 2>&1 |
        stamp_markers "$dir/marks" >"$dir/console.log"
    QEMU_RC=${PIPESTATUS[0]}
    set -e
    t1=$EPOCHREALTIME
    echo "$t0 $t1 $QEMU_RC" >"$dir/host-times"
    sed -n '/^@@PMUSTRESS-RESULT-BEGIN@@/,/^@@PMUSTRESS-RESULT-END@@/{/^@@/d;p}' \
        "$dir/console.log" >"$dir/result.b64"
    if [[ -s $dir/result.b64 ]] && base64 -d "$dir/result.b64" | tar -xz -C "$dir"; then
        rm -f "$dir/result.b64"
    fi
    BOOT_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    BOOT_SECONDS=$(awk -v a="$t0" -v b="$(mark_field "$dir/marks" @@PMUSTRESS-INIT@@ - host)" \
        'BEGIN { if (b == "") print "?"; else printf "%.1f", b - a }')
}

# run_seconds MARKS NAME: "GUEST WALL" seconds between run NAME's start and end markers
# ("?" for a marker that never came).
run_seconds() {
    local marks=$1 run=$2
    awk -v a="$(mark_field "$marks" @@PMUSTRESS-RUN-START@@ "$run" uptime)" \
        -v b="$(mark_field "$marks" @@PMUSTRESS-RUN-END@@ "$run" uptime)" \
        -v c="$(mark_field "$marks" @@PMUSTRESS-RUN-START@@ "$run" host)" \
        -v d="$(mark_field "$marks" @@PMUSTRESS-RUN-END@@ "$run" host)" \
        'BEGIN {
            if (a == "" || b == "") printf "? "; else printf "%.2f ", b - a
            if (c == "" || d == "") print "?"; else printf "%.1f\n", d - c
        }'
}

# ---------------------------------------------------------------------------------------
# The small kernel: Debian's linux-source-6.1, allnoconfig + the fragment

SRC_PKG=linux-source-6.1
FRAGMENT=$QEMU_DIR/kernel.config
PATCH=$QEMU_DIR/patches/oracle.patch
# The candidate fix and the oracle's counters on it, applied in this order after
# oracle.patch for the fixed kernel (build-kernel.sh fixed; qemu/README.md).
FIX_PATCHES=("$QEMU_DIR/patches/fix.patch" "$QEMU_DIR/patches/fix-oracle.patch")
# The faults `pmustress check`'s known answers boot with (pmustress_fault=N), applied
# after oracle.patch for the faulty kernel (build-kernel.sh faulty).
FAULT_PATCHES=("$QEMU_DIR/patches/faults.patch")
KERNEL_JOBS=${PMUSTRESS_KERNEL_JOBS:-3}

# kernel_make SRCDIR OBJDIR MAKE-ARGS...: make for arm64, out of tree, quietly.
kernel_make() {
    local src=$1 obj=$2
    shift 2
    make -s -C "$src" O="$obj" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- "$@" >&2
}

# extra_patches fixed|faulty: the patches a variant applies after oracle.patch.
extra_patches() {
    case $1 in
    fixed) printf '%s\n' "${FIX_PATCHES[@]}" ;;
    faulty) printf '%s\n' "${FAULT_PATCHES[@]}" ;;
    esac
}

# kernel_key small|oracle|fixed|faulty: the cache key of a build of linux-source-6.1 with the
# fragment (and the variant's patches).
kernel_key() {
    local variant=$1 srcver gccver f
    srcver=$(dpkg-query -W -f='${Version}' "$SRC_PKG")
    gccver=$(dpkg-query -W -f='${Version}' gcc-aarch64-linux-gnu)
    {
        cat "$FRAGMENT"
        echo "$SRC_PKG $srcver"
        echo "gcc-aarch64-linux-gnu $gccver"
        if [[ $variant == oracle || $variant == fixed || $variant == faulty ]]; then
            echo "oracle.patch"
            cat "$PATCH"
        fi
        if [[ $variant == fixed || $variant == faulty ]]; then
            for f in $(extra_patches "$variant"); do
                echo "${f##*/}"
                cat "$f"
            done
        fi
    } | sha256sum | cut -c1-16
}

check_config() {
    local config=$1 sym bad=0
    for sym in CONFIG_ARM64_PSEUDO_NMI CONFIG_HW_PERF_EVENTS CONFIG_ARM_PMU \
        CONFIG_ARM_GIC_V3 CONFIG_IKCONFIG_PROC CONFIG_SERIAL_AMBA_PL011_CONSOLE \
        CONFIG_BLK_DEV_INITRD CONFIG_RD_GZIP CONFIG_MAGIC_SYSRQ CONFIG_SMP; do
        if ! grep -qx "$sym=y" "$config"; then
            log "ERROR: $config lacks $sym=y"
            bad=1
        fi
    done
    ((bad == 0)) || die "kernel config is not what the fragment asks for (symbol renamed or dependency missing?)"
}

# bisect_tree_dir TREE: where bisect-step.sh keeps the object tree and the steps' results
# of the kernel tree at the physical path TREE: its name and a hash of its path.
bisect_tree_dir() {
    printf '%s/bisect/%s-%s\n' "$CACHE" "$(basename "$1")" "$(printf '%s' "$1" | sha256sum | cut -c1-12)"
}
