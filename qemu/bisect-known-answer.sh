#!/bin/bash
# Bisects with a known answer: `git bisect run qemu/bisect-step.sh` on a throwaway
# history of Linux 6.1 must name the one commit that makes the arm64 PMU driver lose
# overflow interrupts again (a regression), and with --fix the one that stopped it (a
# fix).
#
#   qemu/bisect-known-answer.sh [--src DIR] [--history pnmi|driver] [-- BISECT-STEP-ARGS...]
#
# The history, on top of Debian's linux-source-6.1 with qemu/patches/oracle.patch (the
# same source as the oracle kernel of qemu/run.sh), one commit each:
#
#   A  the base: pseudo-NMI off by default         bad (the fix bisect's broken end)
#   B1 Documentation only                          bad
#   B  arm64: pseudo-NMI on by default             good: the fix to find; the regression
#                                                  bisect's good end
#   C  Documentation only                          good (the fix bisect's fixed end)
#   D  arm64: pseudo-NMI off by default again      bad: the commit to find
#   E  perf: arm_pmu: a syntax error               does not build: must be skipped (125)
#   F  perf: arm_pmu: fix the build                bad
#   G  net: dummy (not in the config)              bad
#   H  Documentation only                          bad (the bisect's bad end)
#
# Without pseudo-NMI an overflow pending when the kernel stops the event is lost; with
# it (enable_pseudo_nmi, set by irqchip.gicv3_pseudo_nmi=1, or here by default) none is.
# The regression bisect (bad H, good B) visits E first (the middle), which does not
# build, then D and C. The fix bisect (git bisect start --term-old=broken
# --term-new=fixed, fixed C, broken A; bisect-step.sh --fix) visits B, then B1: both
# of --fix's mappings.
# The commits have fixed names and dates, so their hashes are the same on every machine
# with the same linux-source-6.1; the check is by subject, and the hash is printed.
#
# --history driver (what .ci/run bisects): the same shape on a real driver change. B is
# the candidate fix (qemu/patches/fix.patch, with fix-oracle.patch: the driver delivers
# an overflow overdue at a stop after the restart) and D its revert; the pseudo-NMI
# default is left alone (off). pmustress's judge follows both drivers' rules, so on
# the fixed commits the late deliveries are late interrupts and the step is good
# (qemu/README.md, "A candidate fix").
#
# The repository is cached as $CACHE/bisect-known-answer/KEY/linux (KEY: the oracle
# kernel's: linux-source-6.1's version, qemu/kernel.config, the cross compiler,
# oracle.patch), its object tree where bisect-step.sh keeps it; the history is made
# again on every run (seconds), so changing it here costs no full kernel build. The
# first run takes the oracle kernel's build when build-kernel.sh kept it
# (PMUSTRESS_KEEP_KERNEL_BUILD=1: .ci/run sets it for run.sh; the repository is then a
# link to $CACHE/kernel/work-KEY/src), else builds the kernel once (~5-13 min on 2
# CPUs); later runs rebuild what a checkout touched (an object file or two, the link).
#
# Every step that booted is also checked against the oracle (the kernel counts the
# overflows its driver lost): a bad verdict needs losses, a good one none.
#
# Exit: 0 when git bisect named exactly D and, for the fix, B, and the oracle agrees
# with every verdict; 1 otherwise; 2 on a usage error.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HISTORY=pnmi

# The subjects of the commits to find (and of the fix bisect's fixed end) by history.
set_subjects() {
    case $HISTORY in
    pnmi)
        REGRESSION_SUBJECT="arm64: cpufeature: pseudo-NMI off by default again"
        FIX_SUBJECT="arm64: cpufeature: pseudo-NMI on by default"
        FIXED_END_SUBJECT="Documentation/arm64: say pseudo-NMIs are on by default" ;;
    driver)
        FIX_SUBJECT="perf: arm_pmu: deliver an overflow overdue at a stop after the restart"
        REGRESSION_SUBJECT="Revert \"$FIX_SUBJECT\""
        FIXED_END_SUBJECT="Documentation/arm64: say the PMU delivers overflows pending at a stop" ;;
    *) usage >&2; exit 2 ;;
    esac
}

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

# git with fixed identities and dates: the same commits, the same hashes, everywhere.
git_fixed() {
    GIT_AUTHOR_NAME="pmustress known answer" GIT_AUTHOR_EMAIL="known-answer@pmustress.invalid" \
        GIT_COMMITTER_NAME="pmustress known answer" \
        GIT_COMMITTER_EMAIL="known-answer@pmustress.invalid" \
        GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z" \
        git -C "$REPO" -c commit.gpgsign=false -c core.hooksPath=/dev/null -c gc.auto=0 "$@"
}

# commit_step SUBJECT [ADD-OPTION]: commit everything changed with that subject.
commit_step() {
    git_fixed add -A ${2:+"$2"}
    git_fixed commit -q -m "$1"
}

# The base: the unpacked source with the oracle patch, one commit, tagged "base".
make_base_repo() {
    local tmp=$REPO.tmp start=$SECONDS
    rm -rf "$tmp"
    mkdir -p "$tmp"
    log "known answer: unpacking /usr/src/$SRC_PKG.tar.xz into $REPO"
    tar -xJf "/usr/src/$SRC_PKG.tar.xz" -C "$tmp" --strip-components=1
    patch -s -p1 -d "$tmp" --no-backup-if-mismatch <"$PATCH" >&2 ||
        die "oracle.patch does not apply to $SRC_PKG"
    mv "$tmp" "$REPO"
    git -C "$REPO" init -q -b main
    log "known answer: committing the base tree"
    # -f: Debian's top-level .gitignore ignores everything ("/*") but debian/.
    commit_step "$BASE_SUBJECT" -f
    git_fixed tag base
    log "known answer: base repository made in $((SECONDS - start)) s"
}

# adopt_oracle_build WORK: the oracle kernel's source and object trees, kept by
# build-kernel.sh (PMUSTRESS_KEEP_KERNEL_BUILD=1, as .ci/run sets), are the base's
# source exactly, built: make WORK/src the repository (in place: the object tree names
# its source by absolute path) and move WORK/obj where bisect-step.sh looks for it (the
# object tree names nothing by its own path). Saves a whole kernel build.
adopt_oracle_build() {
    local work=$1 src tree_dir start=$SECONDS
    src=$(cd "$work/src" && pwd -P)
    tree_dir=$(bisect_tree_dir "$src")
    log "known answer: adopting the oracle kernel's kept build $work as the base"
    rm -rf "$tree_dir/obj"
    mkdir -p "$tree_dir"
    mv "$work/obj" "$tree_dir/obj"
    ln -s "$src" "$REPO"
    git -C "$REPO" init -q -b main
    commit_step "$BASE_SUBJECT" -f
    git_fixed tag base
    log "known answer: base repository made in $((SECONDS - start)) s"
}

# sub FILE OLD NEW: replace the one line OLD by NEW in FILE (fails if OLD is not there
# exactly once).
sub() {
    local f=$REPO/$1
    (($(grep -cxF -- "$2" "$f") == 1)) || die "known answer: '$2' is not in $1 exactly once"
    OLD=$2 NEW=$3 perl -0pi -e 's/^\Q$ENV{OLD}\E$/$ENV{NEW}/m' "$f"
}

# The history on top of the base, made again every run (same content, same hashes).
make_history() {
    local p
    git_fixed checkout -q -f -B main base
    if [[ $HISTORY == driver ]]; then
        printf '\nThe PMU driver loses an overflow pending when an event is stopped.\n' \
            >>"$REPO/Documentation/arm64/silicon-errata.rst"
        commit_step "Documentation/arm64: say the PMU loses overflows pending at a stop"
        for p in "${FIX_PATCHES[@]}"; do
            patch -s -p1 -d "$REPO" --no-backup-if-mismatch <"$p" >&2 ||
                die "known answer: ${p##*/} does not apply"
        done
        commit_step "$FIX_SUBJECT"
        printf '\nIt delivers such an overflow after the event restarts.\n' \
            >>"$REPO/Documentation/arm64/silicon-errata.rst"
        commit_step "$FIXED_END_SUBJECT"
        git_fixed revert --no-edit HEAD~1 >/dev/null
    else
        printf '\nPseudo-NMIs are off unless irqchip.gicv3_pseudo_nmi=1 is given.\n' \
            >>"$REPO/Documentation/arm64/silicon-errata.rst"
        commit_step "Documentation/arm64: say pseudo-NMIs are off by default"
        sub arch/arm64/kernel/cpufeature.c 'static bool enable_pseudo_nmi;' \
            'static bool enable_pseudo_nmi = true;'
        commit_step "$FIX_SUBJECT"
        printf '\nPseudo-NMIs are on unless irqchip.gicv3_pseudo_nmi=0 is given.\n' \
            >>"$REPO/Documentation/arm64/silicon-errata.rst"
        commit_step "$FIXED_END_SUBJECT"
        sub arch/arm64/kernel/cpufeature.c 'static bool enable_pseudo_nmi = true;' \
            'static bool enable_pseudo_nmi;'
        commit_step "$REGRESSION_SUBJECT"
    fi
    printf '\nstatic int pmustress_known_answer_broken = ;\n' >>"$REPO/drivers/perf/arm_pmu.c"
    commit_step "perf: arm_pmu: a stray line that does not compile"
    sub drivers/perf/arm_pmu.c 'static int pmustress_known_answer_broken = ;' ''
    commit_step "perf: arm_pmu: fix the build"
    sub drivers/net/dummy.c '	[I tweaked this explanation a little but that'"'"'s all]' \
        '	[I tweaked this explanation a little, but that is all]'
    commit_step "net: dummy: reword a comment (a driver the config leaves out)"
    printf '\nThe driver loses no overflow interrupt with pseudo-NMIs on.\n' \
        >>"$REPO/Documentation/arm64/silicon-errata.rst"
    commit_step "Documentation/arm64: a note on the PMU and pseudo-NMIs"
}

# by_subject SUBJECT: the newest commit of main with exactly that subject (a revert's
# message contains its commit's subject too).
by_subject() {
    git -C "$REPO" log --format='%H %s' main | S="$1" awk '$0 == $1 " " ENVIRON["S"] { print $1; exit }'
}

# oracle_agrees LOG: every step of LOG that booted, its verdict against the driver's own
# count of the overflows it lost in that run (qemu/patches/oracle.patch): bad needs
# lost > 0, good lost = 0. Prints "N steps" or what disagrees; fails on a disagreement.
oracle_agrees() {
    local log=$1 tree_dir short verdict d b a n=0 bad=()
    tree_dir=$(bisect_tree_dir "$(cd "$REPO" && pwd -P)")
    while read -r short verdict; do
        d=$tree_dir/$(git -C "$REPO" rev-parse "$short")/result/runs/bisect
        b=$(awk '$1 == "lost" { print $2 }' "$d/oracle-before" 2>/dev/null || true)
        a=$(awk '$1 == "lost" { print $2 }' "$d/oracle-after" 2>/dev/null || true)
        if ! [[ $b =~ ^[0-9]+$ && $a =~ ^[0-9]+$ ]]; then
            bad+=("$short: no oracle counters in $d")
        elif [[ $verdict == bad ]] && ((a - b == 0)); then
            bad+=("$short: pmustress says bad, the oracle lost none")
        elif [[ $verdict == good ]] && ((a - b > 0)); then
            bad+=("$short: pmustress says good, the oracle lost $((a - b))")
        fi
        n=$((n + 1))
    done < <(sed -nE 's/^bisect-step ([0-9a-f]+): (good|bad)[ ,].*/\1 \2/p' "$log")
    if ((${#bad[@]})); then
        (IFS=';'; echo "the oracle disagrees: ${bad[*]}")
        return 1
    fi
    echo "$n"
}

# run_bisect NAME NEW OLD EXPECTED-SUBJECT [TERM-OLD TERM-NEW] -- STEP-ARGS...: one
# `git bisect run`; prints PASS or FAIL; returns 0 only if it named the expected commit.
run_bisect() {
    local name=$1 new=$2 old=$3 subject=$4 term_new=bad terms=() expected rc
    local found agree log=$WORK/$1.log start=$SECONDS
    shift 4
    if [[ $1 != -- ]]; then
        term_new=$2 terms=(--term-old="$1" --term-new="$2")
        shift 2
    fi
    shift
    expected=$(by_subject "$subject")
    log "known answer, $name: git bisect start ${terms[*]:+${terms[*]} }$new $old; git bisect run qemu/bisect-step.sh $*"
    git -C "$REPO" bisect reset >/dev/null 2>&1 || true
    git -C "$REPO" bisect start "${terms[@]}" "$new" "$old" >/dev/null
    set +e
    (cd "$REPO" && git bisect run "$QEMU_DIR/bisect-step.sh" "$@") >"$log" 2>&1
    rc=$?
    set -e
    grep -E '^bisect-step |is the first|could be any|^bisect (found|run)' "$log" >&2 || true
    found=$(git -C "$REPO" rev-parse -q --verify "refs/bisect/$term_new" || true)
    git -C "$REPO" bisect log >"$WORK/$name.bisect-log" 2>/dev/null || true
    git -C "$REPO" bisect reset >/dev/null 2>&1 || true
    if ! agree=$(oracle_agrees "$log"); then
        printf 'FAIL bisect known answer, %s: %s (see %s)\n' "$name" "$agree" "$log"
        return 1
    fi
    if ((rc == 0)) && [[ $found == "$expected" ]] &&
        grep -q "^$expected is the first $term_new commit" "$log"; then
        printf 'PASS bisect known answer, %s: git bisect named %s "%s" (%d steps, the oracle agrees with all %d verdicts; %d s)\n' \
            "$name" "${expected:0:12}" "$subject" "$(grep -c '^bisect-step ' "$log")" \
            "$agree" $((SECONDS - start))
        return 0
    fi
    printf 'FAIL bisect known answer, %s: git bisect run exited %s and named %s, want %s "%s" (see %s)\n' \
        "$name" "$rc" "${found:0:12}" "${expected:0:12}" "$subject" "$log"
    return 1
}

main() {
    local step_args=() key start=$SECONDS failed=0
    SRC=${PMUSTRESS_SRC:-$(cd "$QEMU_DIR/.." && pwd)}
    while (($#)); do
        case $1 in
        --src) SRC=$2; shift 2 ;;
        --history) HISTORY=$2; shift 2 ;;
        --) shift; step_args=("$@"); break ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
        esac
    done
    set_subjects
    [[ $(id -u) == 0 ]] || die "run as root (apt-get)"
    ensure_pkgs "$SRC_PKG" git patch perl xz-utils
    key=$(kernel_key oracle)
    WORK=$CACHE/bisect-known-answer/$key
    REPO=$WORK/linux
    mkdir -p "$WORK"
    BASE_SUBJECT="base: $(dpkg-query -W -f='${Package} ${Version}' "$SRC_PKG") with qemu/patches/oracle.patch"
    if ! git -C "$REPO" rev-parse -q --verify base >/dev/null 2>&1; then
        rm -rf "$REPO"
        if [[ -f $CACHE/kernel/work-$key/obj/vmlinux && -f $CACHE/kernel/oracle-6.1-$key/Image ]]; then
            # Under the kernel lock: build-kernel.sh fixed patches that source tree
            # in place while it builds the fixed kernel from it.
            with_lock "$CACHE/kernel/lock" adopt_oracle_build "$CACHE/kernel/work-$key"
        else
            make_base_repo
        fi
    fi
    git -C "$REPO" bisect reset >/dev/null 2>&1 || true
    make_history
    git -C "$REPO" log --format='  %h %s' base..main >&2
    export PMUSTRESS_SRC=$SRC
    # The tip's kernel first: the whole kernel only when nothing was built or adopted,
    # else what the history touched (an object file or two and the link).
    log "known answer: building the tip"
    (cd "$REPO" && "$QEMU_DIR/bisect-step.sh" --build-only) >&2 ||
        die "known answer: the tip does not build"
    run_bisect regression main "$(by_subject "$FIX_SUBJECT")" "$REGRESSION_SUBJECT" \
        -- "${step_args[@]}" || failed=1
    run_bisect fix "$(by_subject "$FIXED_END_SUBJECT")" base "$FIX_SUBJECT" broken fixed \
        -- --fix "${step_args[@]}" || failed=1
    log "known answer: $((SECONDS - start)) s in all"
    return "$failed"
}

main "$@"
