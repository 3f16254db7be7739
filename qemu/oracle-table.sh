#!/bin/bash
# Summarise the oracle's numbers over several `qemu/run.sh` result directories.
#
#   qemu/oracle-table.sh DIR...
#
# Reads DIR/runs.tsv (one row per pmustress run, written by run.sh) and prints a
# markdown table, one row per case/run: how many runs, the range (min..max) of the
# oracle's lost, handled, rebase_irq, rebase_restart and restart_overflowed over them,
# and the range of pmustress's dropped interrupts (.totals.interrupts.dropped) next to
# the oracle's lost, with the number of runs where the two differ. Runs without oracle numbers (the Debian stock kernel, branches-125) are left
# out. Injected drops count on the oracle's side: dropped is compared to lost +
# injected.
set -euo pipefail

(($#)) || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }
for d in "$@"; do
    [[ -f $d/runs.tsv ]] || { echo "no $d/runs.tsv" >&2; exit 1; }
done

for d in "$@"; do
    cat "$d/runs.tsv"
done | awk -F'\t' '
function upd(key, name, v) {
    if (v !~ /^-?[0-9]+$/) return
    v += 0
    if (!((key, name, "n") in r)) { r[key, name, "lo"] = v; r[key, name, "hi"] = v }
    if (v < r[key, name, "lo"]) r[key, name, "lo"] = v
    if (v > r[key, name, "hi"]) r[key, name, "hi"] = v
    r[key, name, "n"]++
}
function rng(key, name) {
    if (!((key, name, "n") in r)) return "-"
    if (r[key, name, "lo"] == r[key, name, "hi"]) return r[key, name, "lo"]
    return r[key, name, "lo"] ".." r[key, name, "hi"]
}
$1 == "case" { for (i = 1; i <= NF; i++) col[$i] = i; next }
{
    lost = $col["oracle_lost"]
    if (lost !~ /^[0-9]+$/) next
    key = $1 "/" $2
    if (!(key in n)) order[++keys] = key
    n[key]++
    upd(key, "lost", lost)
    upd(key, "handled", $col["oracle_handled"])
    upd(key, "rebase_irq", $col["oracle_rebase_irq"])
    upd(key, "rebase_restart", $col["oracle_rebase_restart"])
    upd(key, "restart_overflowed", $col["oracle_restart_overflowed"])
    upd(key, "throttled", $col["oracle_throttled"])
    ours = $col["dropped"]
    inj = $col["injected"]
    upd(key, "dropped", ours)
    # Injected drops are pmustress discarding real samples: compare to lost + injected.
    if (inj ~ /^[0-9]+$/) lost += inj
    if (ours != lost) diff[key]++
    if ($NF == "PASS") pass[key]++
}
END {
    print "| case/run | runs | lost | handled | rebase_irq | rebase_restart | restart_overflowed | throttled | pmustress dropped | runs where dropped != lost | passed |"
    print "|---|---|---|---|---|---|---|---|---|---|---|"
    for (k = 1; k <= keys; k++) {
        key = order[k]
        printf "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n", key, n[key],
            rng(key, "lost"), rng(key, "handled"), rng(key, "rebase_irq"),
            rng(key, "rebase_restart"), rng(key, "restart_overflowed"),
            rng(key, "throttled"), rng(key, "dropped"),
            diff[key] + 0, pass[key] + 0
    }
}'
