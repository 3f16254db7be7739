#!/usr/bin/env bash
# Soak: one long `pmustress run` with the defaults, sampling its memory.
#
#   scripts/soak.sh [--event EVENT] [--duration DURATION] [--out DIR] [--bin BINARY] [-- RUN ARGS...]
#
# Defaults: --event task-clock (every machine has it), --duration 1h,
# --out /tmp/pmustress-soak, --bin target/release/pmustress. Arguments after
# `--` go to `pmustress run` as they are.
#
# Writes DIR/rss.tsv (every SOAK_SAMPLE_SECONDS, default 10: seconds since
# the start, VmRSS, RssAnon, RssFile, the resident part of the malloc heap,
# VmHWM, all KiB), DIR/console.txt (the run's output) and the run's results
# in DIR/run. At the end it prints the growth of VmRSS after the first
# minute (from the first sample at 60 s or later to the last, and to the
# largest) against the target: less than 1 MiB (benches/README.md). Runs
# at nice SOAK_NICE (default 10): the machine may be shared. Ctrl-C stops
# the run as pmustress stops on it (results kept) and still prints the
# growth. Exit status: the run's.
set -euo pipefail

event=task-clock
duration=1h
out=/tmp/pmustress-soak
bin=target/release/pmustress
while (($#)); do
    case $1 in
    --event | --duration | --out | --bin)
        if (($# < 2)); then
            echo "soak.sh: $1 needs a value" >&2
            exit 2
        fi
        case $1 in
        --event) event=$2 ;;
        --duration) duration=$2 ;;
        --out) out=$2 ;;
        --bin) bin=$2 ;;
        esac
        shift 2
        ;;
    --)
        shift
        break
        ;;
    *)
        echo "soak.sh: unknown argument $1 (accepted: --event, --duration, --out, --bin, -- RUN ARGS)" >&2
        exit 2
        ;;
    esac
done
interval=${SOAK_SAMPLE_SECONDS:-10}
niceness=${SOAK_NICE:-10}
target_kib=1024

mkdir -p "$out"
tsv=$out/rss.tsv
nice -n "$niceness" "$bin" run --event "$event" --duration "$duration" \
    --out "$out/run" --replace "$@" >"$out/console.txt" 2>&1 &
pid=$!
# The run stops on SIGINT/SIGTERM and writes its results: pass them on and
# keep sampling until it has.
trap 'kill -INT "$pid" 2>/dev/null || true' INT TERM
start=$(date +%s)
printf 'seconds\tvmrss_kib\trssanon_kib\trssfile_kib\theap_kib\tvmhwm_kib\n' >"$tsv"
# One sample: the status fields, and the malloc heap's resident pages
# (its [heap] mapping in smaps; blocks of 128 KiB and more are mappings of
# their own and count in RssAnon only).
sample() {
    local status heap
    status=$(cat "/proc/$pid/status" 2>/dev/null) || return 0
    heap=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { h = ($6 == "[heap]") } h && /^Rss:/ { s += $2 } END { print s + 0 }' \
        "/proc/$pid/smaps" 2>/dev/null) || heap=
    awk -v t="$(($(date +%s) - start))" -v heap="$heap" '
        /^VmRSS:/ { rss = $2 } /^RssAnon:/ { anon = $2 } /^RssFile:/ { file = $2 } /^VmHWM:/ { hwm = $2 }
        END { if (rss != "") printf "%s\t%s\t%s\t%s\t%s\t%s\n", t, rss, anon, file, heap, hwm }
    ' <<<"$status" >>"$tsv"
}
while kill -0 "$pid" 2>/dev/null; do
    sample
    sleep "$interval" &
    wait $! || true
done
rc=0
wait "$pid" || rc=$?
echo "run exit $rc after $(($(date +%s) - start)) s; samples in $tsv"
awk -F'\t' -v target="$target_kib" '
    NR == 1 { next }
    $1 >= 60 && first == "" { first = $2; at = $1 }
    first != "" { last = $2; end = $1; if ($2 > peak) peak = $2 }
    END {
        if (first == "") { print "growth after the first minute: the run was too short to tell"; exit }
        growth = last - first
        printf "VmRSS %d KiB at %d s, %d KiB at %d s: growth after the first minute %+d KiB (largest %+d KiB); target < %d KiB: %s\n",
            first, at, last, end, growth, peak - first, target, (peak - first < target ? "met" : "NOT met")
    }' "$tsv"
exit "$rc"
