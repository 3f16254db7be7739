#!/bin/bash
# The stress a setting makes on Linux's real arm64 PMU driver, under QEMU.
#
#   qemu/sweep.sh [--src DIR] [--out DIR] [--smp LIST] [--seconds S] [--boots K]
#                 [--reps K] [--pnmi] [--settings FILE] ['NAME COMMAND...'...]
#
# Boots the oracle kernel (qemu/README.md) at each -smp of LIST (comma-separated,
# default 2; N:S runs that count's settings for S guest-seconds instead of --seconds),
# without pseudo-NMI unless --pnmi, K times each (--boots, default 1), one QEMU at a time,
# and runs every setting in turn (each --reps times, default 1), the oracle's counters
# read right before and right after each. One TSV row per run in OUT/sweep.tsv: the
# overflows the driver lost and the event stops it made per guest-second (and per CPU),
# and for pmustress its own verdict, dropped and stops read back with the host's
# `pmustress report --format json`. See qemu/README.md, "Stress power: the sweep".
#
# A setting is NAME and a command, one per line of FILE ('#' starts a comment) or one
# per argument; without any, qemu/sweep-settings. Commands:
#   pmustress ARGS...       /pmustress ARGS --duration S (unless ARGS has --duration
#                           or --interrupts); any arguments, so new flags sweep as they come
#   tester MODE PERIOD      qemu/tester/counters.c for S seconds: MODE loop (moved by the
#                           report's `taskset -p 0x1/0x2` loop), self (moves itself back
#                           to back), stay (not moved)
# In a command, {n} is the boot's vCPU count and {Kn} K times it (--workers {2n}).
#
# Environment: as qemu/run.sh (PMUSTRESS_QEMU_CACHE, PMUSTRESS_SRC, PMUSTRESS_QEMU_BIN,
# PMUSTRESS_HOST_BIN, PMUSTRESS_QEMU_CPU, PMUSTRESS_QEMU_ICOUNT); PMUSTRESS_QEMU_TIMEOUT
# (host-side limit per boot, default from the runs it holds).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

# Columns of sweep.tsv. Rates are per guest-second of the setting's nominal time (the
# measured time of pmustress or the tester; the process's own start and judging add
# guest time but no counting event). lost: the oracle's `lost` (an overflow flag a stop
# cleared); overdue: `overdue_at_stop`; stops: `stops` (a running sampling event stopped).
COLUMNS=(smp boot setting command guest_s elapsed_s wall_s exit lost overdue stops handled
    lost_per_s stops_per_s stops_per_cpu_per_s pm_verdict pm_dropped pm_stops pm_moves
    tester_signals tester_without_signal tester_moves)

# expand SMP WORDS...: the words with {n} and {Kn} replaced.
expand() {
    local smp=$1 w k out=()
    shift
    for w in "$@"; do
        while [[ $w =~ \{([0-9]*)n\} ]]; do
            k=${BASH_REMATCH[1]:-1}
            w=${w/"${BASH_REMATCH[0]}"/$((k * smp))}
        done
        out+=("$w")
    done
    printf '%s\n' "${out[@]}"
}

# guest_command SMP SECONDS WORDS...: the guest's command line of a setting.
guest_command() {
    local smp=$1 s=$2 words ms
    shift 2
    mapfile -t words < <(expand "$smp" "$@")
    ms=$(awk -v s="$s" 'BEGIN { printf "%d", s * 1000 + 0.5 }')
    case ${words[0]} in
    pmustress)
        words=("${words[@]:1}")
        if [[ " ${words[*]} " != *" --duration "* && " ${words[*]} " != *" --interrupts "* ]]; then
            words+=(--duration "${ms}ms")
        fi
        ms=$(printf '%q ' "${words[@]}")
        printf '/pmustress %s\n' "${ms% }" ;;
    tester)
        ((${#words[@]} == 3)) || return 1
        printf '/bed/tester %q %q %s\n' "${words[1]}" "${words[2]}" "$s" ;;
    *) return 1 ;;
    esac
}

# Parsed settings: names and commands (words joined by single spaces).
SET_NAMES=() SET_CMDS=()
add_setting() {
    local line=$1 name rest
    line=${line%%#*}
    read -r name rest <<<"$line" || true
    [[ -n $name ]] || return 0
    [[ $name =~ ^[A-Za-z0-9._-]+$ ]] ||
        die "setting '$name': a name is letters, digits, '.', '_' or '-'"
    [[ -n $rest ]] || die "setting $name: no command"
    # shellcheck disable=SC2086 # the words of the command
    guest_command 2 1 $rest >/dev/null ||
        die "setting $name: the command is 'pmustress ARGS...' or 'tester loop|self|stay PERIOD', not '$rest'"
    SET_NAMES+=("$name")
    SET_CMDS+=("$rest")
}

# Runs of the current boot: RUN_NAMES[i], RUN_SETTINGS[i], RUN_LINES[i] (guest command).
write_init() {
    local i
    init_head
    for i in "${!RUN_NAMES[@]}"; do
        printf 'run_one %s %s\n' "${RUN_NAMES[i]}" "${RUN_LINES[i]}"
    done
    # The runs' raw streams (raw.csv.gz, megabytes each) would take minutes to cross
    # the serial console under -icount; the sweep reads run.json only.
    # shellcheck disable=SC2016 # for the guest's shell
    printf '%s\n' 'find $R/runs -name "*.gz" -exec rm -f {} \;'
    init_tail
}

# A field of the tester's output line ("name value" pairs) in file $1.
tester_field() {
    awk -v k="$2" '/^counters: / { for (i = 2; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' \
        "$1" 2>/dev/null | grep . || echo -
}

# rate COUNT SECONDS [DIVISOR]: COUNT / SECONDS / DIVISOR with one decimal, or "-".
rate() {
    awk -v c="$1" -v s="$2" -v d="${3:-1}" \
        'BEGIN { if (c !~ /^[0-9]+$/ || s <= 0) print "-"; else printf "%.1f", c / s / d }'
}

# sweep_boot SMP BOOT SECONDS: one boot running every setting, rows into $TSV.
sweep_boot() {
    local smp=$1 boot=$2 s=$3 dir initrd append i r name d guest wall k line
    local -A O=()
    dir=$OUT/smp$smp-b$boot
    rm -rf "$dir"
    mkdir -p "$dir"
    RUN_NAMES=() RUN_SETTINGS=() RUN_LINES=()
    for i in "${!SET_NAMES[@]}"; do
        for ((r = 1; r <= REPS; r++)); do
            name=${SET_NAMES[i]}
            ((REPS == 1)) || name+=.r$r
            RUN_NAMES+=("$name")
            RUN_SETTINGS+=("$i")
            # shellcheck disable=SC2086 # the words of the command
            RUN_LINES+=("$(guest_command "$smp" "$s" ${SET_CMDS[i]})")
        done
    done
    # A hung command is cut by the guest; the host's limit only catches a dead guest.
    GUEST_TIMEOUT=$(awk -v s="$s" 'BEGIN { t = 10 * s + 30; printf "%d", t }')
    TIMEOUT=${PMUSTRESS_QEMU_TIMEOUT:-$((${#RUN_NAMES[@]} * (GUEST_TIMEOUT + 10) * smp * 4 + 300))}
    initrd=$dir/initrd.gz
    INITRAMFS_EXTRA=$TESTER_EXTRA make_initramfs "$initrd"
    append="console=ttyAMA0 panic=-1${PNMI:+ irqchip.gicv3_pseudo_nmi=1}"
    {
        printf '%s\n' "kernel $ORACLE_IMAGE" "append $append" "smp $smp" "cpu $QEMU_CPU" \
            "icount $QEMU_ICOUNT" "seconds $s"
        for i in "${!RUN_NAMES[@]}"; do
            printf 'run %s: %s\n' "${RUN_NAMES[i]}" "${RUN_LINES[i]}"
        done
    } >"$dir/boot.txt"
    log "smp $smp boot $boot: ${#RUN_NAMES[@]} runs of ${s} guest-s (limit ${TIMEOUT} s)"
    boot_guest "$dir" "$ORACLE_IMAGE" "$smp" "$append" "$initrd"
    rm -f "$initrd"
    log "smp $smp boot $boot: qemu exit $QEMU_RC, wall ${BOOT_WALL} s"
    for i in "${!RUN_NAMES[@]}"; do
        name=${RUN_NAMES[i]}
        d=$dir/result/runs/$name
        read -r guest wall < <(run_seconds "$dir/marks" "$name")
        for k in lost overdue_at_stop stops handled; do
            O[$k]=$(oracle_delta "$d" "$k")
        done
        local ex=- verdict=- dropped=- pstops=- moves=- sig=- wos=- tmoves=-
        [[ -f $d/exit_code ]] && ex=$(<"$d/exit_code")
        if [[ ${RUN_LINES[i]} == /pmustress* ]]; then
            if [[ -f $d/run/run.json ]] && read_run "$d/run" "$d/report.json" >/dev/null; then
                read -r verdict dropped pstops moves < <(jq -r '.[0].run |
                    [.verdict // "-", .totals.interrupts.dropped // "-",
                     .totals.interrupts.stops // "-", .totals.migrations_requested // "-"] |
                    map(tostring) | join(" ")' "$d/report.json")
            fi
        else
            sig=$(tester_field "$d/stdout" signals)
            wos=$(tester_field "$d/stdout" without_signal)
            tmoves=$(tester_field "$d/stdout" moves)
        fi
        line=$(printf '%s\t' "$smp" "$boot" "$name" "${SET_CMDS[RUN_SETTINGS[i]]}" "$s" \
            "$guest" "$wall" "$ex" "${O[lost]}" "${O[overdue_at_stop]}" "${O[stops]}" \
            "${O[handled]}" "$(rate "${O[lost]}" "$s")" "$(rate "${O[stops]}" "$s")" \
            "$(rate "${O[stops]}" "$s" "$smp")" "$verdict" "$dropped" "$pstops" "$moves" \
            "$sig" "$wos" "$tmoves")
        printf '%s\n' "${line%$'\t'}" >>"$TSV"
        printf '  smp %-2s b%s %-22s lost/s %8s  stops/s %9s  stops/cpu/s %8s  %s\n' "$smp" \
            "$boot" "$name" "$(rate "${O[lost]}" "$s")" "$(rate "${O[stops]}" "$s")" \
            "$(rate "${O[stops]}" "$s" "$smp")" \
            "$([[ $verdict != - ]] && echo "pmustress $verdict, dropped $dropped" || echo "exit $ex")"
    done
}

main() {
    local smps="2" boots=1 settings_file="" spec smp s b start=$SECONDS kernel_log
    SRC=${PMUSTRESS_SRC:-$(cd "$QEMU_DIR/.." && pwd)}
    OUT="" SECONDS_PER=3 REPS=1 PNMI=""
    local args=()
    while (($#)); do
        case $1 in
        --src) SRC=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --smp) smps=$2; shift 2 ;;
        --seconds) SECONDS_PER=$2; shift 2 ;;
        --boots) boots=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --pnmi) PNMI=1; shift ;;
        --settings) settings_file=$2; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        -*) usage >&2; exit 2 ;;
        *) args+=("$1"); shift ;;
        esac
    done
    [[ $boots =~ ^[1-9][0-9]*$ ]] || die "--boots: a count (1, 2, ...), not '$boots'"
    [[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps: a count (1, 2, ...), not '$REPS'"
    [[ $SECONDS_PER =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
        die "--seconds: guest seconds (3, 1.5), not '$SECONDS_PER'"
    [[ $smps =~ ^[0-9]+(:[0-9]+(\.[0-9]+)?)?(,[0-9]+(:[0-9]+(\.[0-9]+)?)?)*$ ]] ||
        die "--smp: vCPU counts, each optionally with its guest seconds (2,4,16:2), not '$smps'"
    if [[ -n $settings_file ]]; then
        [[ -r $settings_file ]] || die "--settings: cannot read $settings_file"
    elif ((${#args[@]} == 0)); then
        settings_file=$QEMU_DIR/sweep-settings
    fi
    if [[ -n $settings_file ]]; then
        while IFS= read -r spec || [[ -n $spec ]]; do add_setting "$spec"; done <"$settings_file"
    fi
    for spec in "${args[@]}"; do add_setting "$spec"; done
    ((${#SET_NAMES[@]})) || die "no settings"
    [[ $(id -u) == 0 ]] || die "run as root (apt-get)"
    # One QEMU at a time, below the machine's other work.
    renice -n 5 -p $$ >/dev/null
    OUT=${OUT:-$CACHE/sweeps/$(date +%Y%m%d-%H%M%S)}
    mkdir -p "$OUT" "$CACHE/debs"
    OUT=$(cd "$OUT" && pwd)
    TSV=$OUT/sweep.tsv
    (IFS=$'\t'; echo "${COLUMNS[*]}") >"$TSV"
    log "results in $OUT"

    install_host_packages
    kernel_log=$OUT/build-kernel.log
    log "oracle kernel (build-kernel.sh oracle; log $kernel_log)"
    "$QEMU_DIR/build-kernel.sh" oracle >"$OUT/kernel-path" 2>"$kernel_log" ||
        die "building the oracle kernel failed (see $kernel_log)"
    ORACLE_IMAGE=$(tail -n1 "$OUT/kernel-path")
    fetch_busybox
    build_pmustress
    build_host_pmustress
    build_tester
    log "setup done in $((SECONDS - start)) s"

    local smp_list
    IFS=, read -ra smp_list <<<"$smps"
    for spec in "${smp_list[@]}"; do
        smp=${spec%%:*} s=$SECONDS_PER
        [[ $spec == *:* ]] && s=${spec#*:}
        for ((b = 1; b <= boots; b++)); do
            sweep_boot "$smp" "$b" "$s"
        done
    done
    log "total $((SECONDS - start)) s; $TSV"
}

main "$@"
