#!/usr/bin/env bash
# run-matrix.sh: sweep pmustress over EVENTS x PERIODS x WORKERS x MIGRATE
# (x INTERVALS), one run per case with the same budget, and summarise.
#
#   ./run-matrix.sh                           # the full default sweep (~12 min)
#   ./run-matrix.sh --quick                   # about a minute
#   EVENTS=task-clock ./run-matrix.sh --quick # the pipeline on a VM (no PMU)
#   ./run-matrix.sh --dry-run                 # list the cases, run nothing
#
# Each case writes results/matrix-<UTC>/<case>/ (run.json, stdout.log,
# stderr.log, command); the sweep writes summary.csv and summary.txt there
# and prints the latter. Exit status: 0 every case clean (or passed its
# self-test; a --migrate none control may instead be too short to judge,
# see below), 1 some case found dropped interrupts (or failed its
# self-test), 125 otherwise (nothing, or not every case, could be
# judged: no PMU, unsupported event, inconclusive run, timeout), 2 usage
# error of this script, 130/143 interrupted by SIGINT/SIGTERM (the summary
# then covers the cases run). A failing case never stops the sweep.
#
# A --migrate none case is a control: without migration a worker is
# stopped only when the scheduler preempts it, which can be too seldom to
# reach the stops a clean verdict needs (one worker on an idle 2-CPU VM:
# 8 stops in 5 s, 299 needed). Inconclusive for that alone, it is listed
# as `control` and does not fail the sweep; a drop in it still does.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly REPO
readonly SOFTWARE_EVENTS="task-clock cpu-clock"

usage() {
    cat <<'EOF'
Usage: run-matrix.sh [OPTIONS] [-- PMUSTRESS-RUN-ARGS...]

Sweeps pmustress over every combination of the lists below. Lists are
space- or comma-separated. A flag beats its environment variable, which
beats the default.

  --events LIST      EVENTS     events to count          [branches]
  --periods LIST     PERIODS    overflow periods         [30000 100000 1000000;
                                                          software clocks:
                                                          100000 1000000]
  --workers LIST     WORKERS    worker threads           [1 and one per CPU]
  --migrate LIST     MIGRATE    migration modes          [none ping-pong
                                                          round-robin random]
  --intervals LIST   INTERVALS  --migrate-interval values, migrating modes
                                only                     [0 (back to back)]
  --duration D       DURATION   budget of each case      [30s; --quick 5s]
  --interrupts N     INTERRUPTS budget: signals per worker, instead of or as
                                well as DURATION
  --cpus LIST        CPUS       --cpus of every case     [pmustress's default]
  --results DIR      RESULTS_DIR  where matrix-<UTC>/ goes  [results]
  --bin PATH         PMUSTRESS  the pmustress binary     [built once with
                                                          cargo build --release]
  --case-timeout S   CASE_TIMEOUT  seconds before a case is killed
                                [duration + 120 when the duration is plain]
  --quick            one period per event (pmustress's default: 100000, or
                     1000000 ns for software clocks), WORKERS 1 and
                     one per CPU, all migration modes, 5 s each: about a minute
  --dry-run          print the cases and their commands, run nothing
  -h, --help         this text

Arguments after -- go to every `pmustress run` (e.g. -- --inject-drop-every 50).

Exit status: 0 every case clean (or passed its self-test), 1 some case
found dropped interrupts (or failed its self-test), 125 otherwise (not
every case could be judged), 2 usage, 130/143 interrupted. A --migrate
none control that is inconclusive only for too few stops (no migration
stops it seldom) is listed as `control` and fails nothing.
EOF
}

die_usage() {
    echo "run-matrix.sh: $*" >&2
    echo "run-matrix.sh: see run-matrix.sh --help" >&2
    exit 2
}

# Prints the items of a list given with spaces and/or commas, one a line.
items() {
    local list
    read -r -a list <<<"${1//,/ }"
    ((${#list[@]} == 0)) || printf '%s\n' "${list[@]}"
}

is_software() {
    local e
    for e in $SOFTWARE_EVENTS; do
        [[ $1 == "$e" ]] && return 0
    done
    return 1
}

# Seconds in a plain duration (500ms, 30s, 5m, 2h); fails on anything else.
duration_seconds() {
    local d=$1
    case $d in
        *ms) [[ ${d%ms} =~ ^[0-9]+$ ]] && echo $(((${d%ms} + 999) / 1000)) ;;
        *s) [[ ${d%s} =~ ^[0-9]+$ ]] && echo "${d%s}" ;;
        *m) [[ ${d%m} =~ ^[0-9]+$ ]] && echo $((${d%m} * 60)) ;;
        *h) [[ ${d%h} =~ ^[0-9]+$ ]] && echo $((${d%h} * 3600)) ;;
        *) return 1 ;;
    esac
}

# CPUs in a taskset-style list (0-3,8), or the CPUs this process may use.
count_cpus() {
    local cpulist=$1 n=0 part
    if [[ -z $cpulist ]]; then
        nproc
        return
    fi
    for part in ${cpulist//,/ }; do
        if [[ $part == *-* ]]; then
            n=$((n + ${part#*-} - ${part%-*} + 1))
        else
            n=$((n + 1))
        fi
    done
    echo "$n"
}

# --- settings: flags, then environment, then defaults ----------------------

quick=0
dry_run=0
opt_events=${EVENTS-}
opt_periods=${PERIODS-}
opt_workers=${WORKERS-}
opt_migrate=${MIGRATE-}
opt_intervals=${INTERVALS-}
opt_duration=${DURATION-}
opt_interrupts=${INTERRUPTS-}
opt_cpus=${CPUS-}
opt_results=${RESULTS_DIR-}
opt_bin=${PMUSTRESS-}
opt_timeout=${CASE_TIMEOUT-}
extra=()

need_value() {
    [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"
}

while [[ $# -gt 0 ]]; do
    case $1 in
        --events) need_value "$@"; opt_events=$2; shift 2 ;;
        --periods) need_value "$@"; opt_periods=$2; shift 2 ;;
        --workers) need_value "$@"; opt_workers=$2; shift 2 ;;
        --migrate) need_value "$@"; opt_migrate=$2; shift 2 ;;
        --intervals) need_value "$@"; opt_intervals=$2; shift 2 ;;
        --duration) need_value "$@"; opt_duration=$2; shift 2 ;;
        --interrupts) need_value "$@"; opt_interrupts=$2; shift 2 ;;
        --cpus) need_value "$@"; opt_cpus=$2; shift 2 ;;
        --results) need_value "$@"; opt_results=$2; shift 2 ;;
        --bin) need_value "$@"; opt_bin=$2; shift 2 ;;
        --case-timeout) need_value "$@"; opt_timeout=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --dry-run) dry_run=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; extra=("$@"); break ;;
        *) die_usage "unknown argument '$1'" ;;
    esac
done

ncpus=$(count_cpus "$opt_cpus")
mapfile -t events < <(items "${opt_events:-branches}")
mapfile -t migrate_list < <(items "${opt_migrate:-none ping-pong round-robin random}")
mapfile -t intervals < <(items "${opt_intervals:-0}")
mapfile -t periods_all < <(items "$opt_periods")
# One worker count once (1 and 1 on a 1-CPU machine).
mapfile -t workers_list < <(items "${opt_workers:-1 $ncpus}" | awk '!seen[$0]++')
if [[ -z $opt_duration && -z $opt_interrupts ]]; then
    if ((quick)); then opt_duration=5s; else opt_duration=30s; fi
fi
results_root=${opt_results:-$REPO/results}

((${#events[@]})) || die_usage "EVENTS is empty"
((${#workers_list[@]})) || die_usage "WORKERS is empty"
((${#migrate_list[@]})) || die_usage "MIGRATE is empty"
((${#intervals[@]})) || die_usage "INTERVALS is empty"
for w in "${workers_list[@]}"; do
    [[ $w =~ ^[1-9][0-9]*$ ]] || die_usage "WORKERS: '$w' is not a number of threads"
done
for m in "${migrate_list[@]}"; do
    case $m in none | ping-pong | round-robin | random) ;;
        *) die_usage "MIGRATE: '$m' is not none, ping-pong, round-robin or random" ;;
    esac
done
if [[ -n $opt_interrupts && ! $opt_interrupts =~ ^[1-9][0-9]*$ ]]; then
    die_usage "INTERRUPTS: '$opt_interrupts' is not a number above 0"
fi
if [[ -n $opt_timeout && ! $opt_timeout =~ ^[1-9][0-9]*$ ]]; then
    die_usage "CASE_TIMEOUT: '$opt_timeout' is not a number of seconds"
fi
if [[ -z $opt_timeout && -n $opt_duration ]]; then
    if secs=$(duration_seconds "$opt_duration"); then
        opt_timeout=$((secs + 120))
    fi
fi

# Periods of one event: the given list, else the defaults for its kind
# (--quick: pmustress's own default, 1 ms or 100000 events).
periods_for() {
    if ((${#periods_all[@]})); then
        printf '%s\n' "${periods_all[@]}"
    elif is_software "$1"; then
        if ((quick)); then echo 1000000; else printf '%s\n' 100000 1000000; fi
    else
        if ((quick)); then echo 100000; else printf '%s\n' 30000 100000 1000000; fi
    fi
}

# --- the cases -------------------------------------------------------------

case_names=()
case_event=()
case_period=()
case_workers=()
case_migrate=()
case_interval=()
for event in "${events[@]}"; do
    mapfile -t periods < <(periods_for "$event")
    for period in "${periods[@]}"; do
        for w in "${workers_list[@]}"; do
            for m in "${migrate_list[@]}"; do
                if [[ $m == none ]]; then
                    ivs=('')
                else
                    ivs=("${intervals[@]}")
                fi
                for iv in "${ivs[@]}"; do
                    name="$event-p$period-w$w-$m"
                    # Back to back is the default: name only a pause.
                    [[ -z $iv || $iv == 0 ]] || name+="-i$iv"
                    case_names+=("${name//[^A-Za-z0-9._-]/_}")
                    case_event+=("$event")
                    case_period+=("$period")
                    case_workers+=("$w")
                    case_migrate+=("$m")
                    case_interval+=("$iv")
                done
            done
        done
    done
done
ncases=${#case_names[@]}

# The `pmustress run` arguments of case $1, into the array `args`.
case_args() {
    local i=$1
    args=(--event "${case_event[$i]}")
    args+=(--period "${case_period[$i]}")
    args+=(--workers "${case_workers[$i]}" --migrate "${case_migrate[$i]}")
    [[ -z ${case_interval[$i]} ]] || args+=(--migrate-interval "${case_interval[$i]}")
    [[ -z $opt_cpus ]] || args+=(--cpus "$opt_cpus")
    [[ -z $opt_duration ]] || args+=(--duration "$opt_duration")
    [[ -z $opt_interrupts ]] || args+=(--interrupts "$opt_interrupts")
    args+=("${extra[@]}")
}

budget=${opt_duration:+$opt_duration each}
[[ -n $opt_interrupts ]] && budget+="${budget:+, }$opt_interrupts signals per worker"

if ((dry_run)); then
    echo "$ncases cases ($budget):"
    for i in "${!case_names[@]}"; do
        case_args "$i"
        echo "${case_names[$i]}: pmustress run $(printf '%q ' "${args[@]}")--out DIR/${case_names[$i]}"
    done
    exit 0
fi

# --- the binary ------------------------------------------------------------

if [[ -z $opt_bin ]]; then
    echo "run-matrix.sh: building pmustress (cargo build --release)" >&2
    if ! (cd "$REPO" && cargo build --release --quiet); then
        echo "run-matrix.sh: cannot test: cargo build --release failed" >&2
        exit 125
    fi
    target=${CARGO_TARGET_DIR:-target}
    [[ $target == /* ]] || target=$REPO/$target
    opt_bin=$target/release/pmustress
fi
if [[ ! -x $opt_bin ]]; then
    echo "run-matrix.sh: cannot test: no executable pmustress at $opt_bin" >&2
    exit 125
fi
if ! command -v jq >/dev/null; then
    echo "run-matrix.sh: cannot test: jq is needed to read pmustress report's JSON" >&2
    exit 125
fi

matrix=$results_root/matrix-$(date -u +%Y%m%dT%H%M%SZ)
# Two sweeps started in the same second get distinct directories.
if [[ -e $matrix ]]; then
    n=2
    while [[ -e $matrix-$n ]]; do n=$((n + 1)); done
    matrix=$matrix-$n
fi
if ! mkdir -p "$matrix"; then
    echo "run-matrix.sh: cannot create $matrix" >&2
    exit 125
fi

# --- reading a run --------------------------------------------------------

# Prints verdict, exit status, overflows, dropped, rate, CI low, CI high,
# signals and migrations of the run in directory $1, tab-separated ('' where
# absent). run.json is read by pmustress itself (`report --format json`
# checks it and carries it under "run"); jq only picks the fields.
read_run() {
    local report
    # report exits 125 for a run that did not finish, and still prints it.
    report=$("$opt_bin" report --format json "$1" 2>/dev/null) || true
    if [[ -z $report ]]; then
        printf '\t\t\t\t\t\t\t\t\t\t\n'
        return
    fi
    jq -r '.[0] as $r | $r.run.totals as $t |
        def s: if . == null then "" else tostring end;
        def r3: if . == null then "" else (. * 1000 | round) as $m |
            "\($m / 1000 | floor).\("00\($m % 1000)" | .[-3:])" end;
        [($r.verdict | s), ($r.exit_status | s), ($t.accounted_overflows | s),
         ($t.dropped_interrupts | s), ($t.dropped_rate.per_million | r3),
         ($t.dropped_rate.ci_low_per_million | r3), ($t.dropped_rate.ci_high_per_million | r3),
         ($t.signals | s), ($t.migrations_requested | s),
         (($r.run.inconclusive_because // []) as $w |
            ($w | length > 0) and all($w[]; startswith("not enough stops:")) | tostring),
         (($r.setup_failure // ($r.run.inconclusive_because // [])[0] // "") | gsub("[\t\n]"; " "))
        ] | @tsv' <<<"$report"
}

# --- the sweep -------------------------------------------------------------

# Runs one case in the background and waits for it, so a signal to this
# script runs its trap at once. Ctrl-C reaches pmustress from the terminal
# by itself (one SIGINT: a second would make it quit without saving); a
# SIGTERM sent to this script alone is passed on. Sets `status`.
interrupted=0
child=''
trap 'interrupted=130' INT
trap 'interrupted=143; [[ -z $child ]] || kill -TERM "$child" 2>/dev/null' TERM

run_case() {
    local dir=$1 watchdog=''
    shift
    "$@" >"$dir/stdout.log" 2>"$dir/stderr.log" </dev/null &
    child=$!
    if [[ -n $opt_timeout ]]; then
        # SIGINT at the limit (pmustress saves what it measured), SIGKILL
        # 10 s later.
        (
            sleep "$opt_timeout" &
            trap 'kill $! 2>/dev/null; exit 0' TERM
            wait $! || exit 0
            echo "run-matrix.sh: case timed out after $opt_timeout s" >"$dir/timed-out"
            kill -INT "$child" 2>/dev/null
            sleep 10 &
            wait $!
            kill -KILL "$child" 2>/dev/null
        ) &
        watchdog=$!
    fi
    # `wait` returns early when a trap runs: wait again until the case ended.
    while :; do
        wait "$child"
        status=$?
        kill -0 "$child" 2>/dev/null || break
    done
    child=''
    if [[ -n $watchdog ]]; then
        kill -TERM "$watchdog" 2>/dev/null
        wait "$watchdog" 2>/dev/null
    fi
}

csv=$matrix/summary.csv
header="case,event,period,workers,migrate,interval,verdict,exit_status,overflows,dropped,rate_per_million,ci_low_per_million,ci_high_per_million,signals,migrations"
echo "$header" >"$csv"

n_clean=0
n_dropped=0
n_other=0
n_passed=0
n_failed=0
n_control=0
n_done=0
rows=()
echo "run-matrix.sh: $ncases cases ($budget) into $matrix" >&2
for i in "${!case_names[@]}"; do
    ((interrupted)) && break
    name=${case_names[$i]}
    dir=$matrix/$name
    mkdir -p "$dir"
    case_args "$i"
    cmd=("$opt_bin" run "${args[@]}" --out "$dir")
    printf '%q ' "${cmd[@]}" >"$dir/command"
    echo >>"$dir/command"
    printf '[%d/%d] %s ... ' "$((i + 1))" "$ncases" "$name" >&2
    run_case "$dir" "${cmd[@]}"
    n_done=$((n_done + 1))
    timed_out=0
    [[ -e $dir/timed-out ]] && timed_out=1
    # pmustress exits 130/143 only when SIGINT/SIGTERM stopped it.
    ((timed_out)) || case $status in 130 | 143) interrupted=$status ;; esac

    IFS=$'\t' read -r verdict json_status overflows dropped rate ci_low ci_high signals migrations \
        few_stops_only why < <(read_run "$dir")
    if ((timed_out)); then
        verdict=timeout
    elif [[ -z $verdict ]]; then
        # No run.json: say why from the exit status.
        case $status in
            2) verdict=usage-error ;;
            125) verdict=cannot-test ;;
            130 | 143) verdict=interrupted ;;
            *) verdict=error ;;
        esac
    elif [[ -n $json_status && $json_status != "$status" && $verdict == clean ]]; then
        # run.json says clean but the process did not exit 0 (killed
        # afterwards, or a write error): do not count it as clean.
        verdict=error
    fi
    if [[ ${case_migrate[$i]} == none && $verdict == inconclusive && $few_stops_only == true ]]; then
        verdict=control
    fi
    case $verdict in
        clean) n_clean=$((n_clean + 1)) ;;
        control) n_control=$((n_control + 1)) ;;
        dropped) n_dropped=$((n_dropped + 1)) ;;
        self-test-passed) n_passed=$((n_passed + 1)) ;;
        self-test-failed) n_failed=$((n_failed + 1)) ;;
        *) n_other=$((n_other + 1)) ;;
    esac
    echo "$verdict (exit $status)" >&2
    if [[ ! $verdict =~ ^(clean|dropped|self-test-passed|self-test-failed)$ ]]; then
        # Why, from run.json (its setup failure or first reason), else the
        # last line on stderr (no run.json: a usage error).
        if ((timed_out)); then
            reason=$(cat "$dir/timed-out")
        elif [[ $verdict == control ]]; then
            reason="a control without migration, too few stops to judge: $why"
        elif [[ -n $why ]]; then
            reason=$why
        else
            reason=$(grep -v '^$' "$dir/stderr.log" | tail -n 1)
        fi
        [[ -n $reason ]] && echo "    $reason" >&2
    fi

    echo "$name,${case_event[$i]},${case_period[$i]},${case_workers[$i]},${case_migrate[$i]},${case_interval[$i]},$verdict,$status,$overflows,$dropped,$rate,$ci_low,$ci_high,$signals,$migrations" >>"$csv"
    if [[ -n $rate ]]; then
        rate_text="$rate ($ci_low..$ci_high)"
    else
        rate_text="-"
    fi
    rows+=("$(printf '%-44s %10s %8s  %-34s %s' "$name" "${overflows:--}" "${dropped:--}" "$rate_text" "$verdict")")
done

# --- the summary -----------------------------------------------------------

if ((n_dropped + n_failed > 0)); then
    exit_status=1
elif ((n_clean + n_passed > 0 && n_clean + n_passed + n_control == n_done && n_done == ncases)); then
    exit_status=0
else
    exit_status=125
fi
((interrupted)) && exit_status=$interrupted

{
    echo "pmustress matrix: $matrix"
    echo "budget: $budget; binary: $opt_bin"
    ((${#extra[@]} == 0)) || echo "extra arguments to every run: ${extra[*]}"
    echo
    printf '%-44s %10s %8s  %-34s %s\n' case overflows dropped "dropped/M (95% CI)" verdict
    printf '%s\n' "${rows[@]}"
    echo
    controls=""
    ((n_control == 0)) || controls=", $n_control control(s) without migration too short to judge (too few stops)"
    if ((n_passed + n_failed > 0)); then
        echo "$n_done of $ncases cases run: $n_clean clean, $n_dropped with dropped interrupts, $n_passed passed and $n_failed failed their self-test$controls, $n_other not judged"
    else
        echo "$n_done of $ncases cases run: $n_clean clean, $n_dropped with dropped interrupts$controls, $n_other not judged"
    fi
    case $exit_status in
        0) echo "exit 0: every case clean$([[ $n_control == 0 ]] || echo ", but for the controls")" ;;
        1) echo "exit 1: dropped interrupts found" ;;
        125) if ((n_control > 0 && n_control == n_done)); then
                echo "exit 125: no case but controls was run, and a control judges nothing"
            else
                echo "exit 125: not every case could be judged (see each case's stderr.log)"
            fi ;;
        130 | 143) echo "exit $exit_status: interrupted" ;;
    esac
} >"$matrix/summary.txt"
cat "$matrix/summary.txt"
exit "$exit_status"
