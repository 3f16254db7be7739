#!/usr/bin/env bash
# Soak: one long software-event run with migration, sampling the run's RSS.
#
#   scripts/soak.sh [BINARY] [DURATION] [OUT]      (defaults: target/release/pmustress 30m /tmp/soak)
#
# Writes OUT/console.txt (the run's output), OUT/rss.tsv (seconds, VmRSS kB,
# VmHWM kB, threads, every 30 s) and OUT/run.json. Runs niced: the machine is
# shared. Exit status is the run's.
set -euo pipefail
bin=${1:-target/release/pmustress}
duration=${2:-30m}
out=${3:-/tmp/soak}
interval=${SOAK_SAMPLE_SECONDS:-30}
mkdir -p "$out"
nice -n 19 "$bin" run --event task-clock --period 1000000 \
    --migrate ping-pong --migrate-interval 1ms \
    --duration "$duration" --out "$out" >"$out/console.txt" 2>&1 &
pid=$!
start=$(date +%s)
printf 'seconds\tvmrss_kb\tvmhwm_kb\tthreads\n' >"$out/rss.tsv"
while kill -0 "$pid" 2>/dev/null; do
    if status=$(cat "/proc/$pid/status" 2>/dev/null); then
        rss=$(awk '/^VmRSS:/ {print $2}' <<<"$status")
        hwm=$(awk '/^VmHWM:/ {print $2}' <<<"$status")
        thr=$(awk '/^Threads:/ {print $2}' <<<"$status")
        printf '%s\t%s\t%s\t%s\n' "$(($(date +%s) - start))" "$rss" "$hwm" "$thr" >>"$out/rss.tsv"
    fi
    sleep "$interval" &
    wait $! || true
done
rc=0
wait "$pid" || rc=$?
echo "exit $rc after $(($(date +%s) - start)) s" >>"$out/rss.tsv"
exit "$rc"
