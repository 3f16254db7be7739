#!/bin/sh
# The baselines of the QEMU bed (qemu/sweep.sh, the smp2-yield case of qemu/run.sh), run
# in the guest as /bed/tester with busybox's sh and taskset:
#
#   tester loop|self|stay PERIOD SECONDS [--out DIR]
#
# loop: the original report's method: /counters (qemu/tester/counters.c) left alone,
#       moved by `while :; do taskset -p 0x1 PID; taskset -p 0x2 PID; done`.
# self: /counters moving itself back to back between CPUs 0 and 1.
# stay: /counters not moved.
# `--out DIR` (what the bed's run_one appends) is ignored: stdout is kept.
mode=$1 period=$2 seconds=$3
case $mode in
loop)
    /counters "$period" "$seconds" stay &
    p=$!
    (while :; do taskset -p 0x1 "$p"; taskset -p 0x2 "$p"; done) >/dev/null 2>&1 &
    l=$!
    wait "$p"
    rc=$?
    kill "$l" 2>/dev/null
    wait "$l" 2>/dev/null
    exit "$rc" ;;
self | stay)
    exec /counters "$period" "$seconds" "$mode" ;;
*)
    echo "usage: tester loop|self|stay PERIOD SECONDS [--out DIR]" >&2
    exit 2 ;;
esac
