/*!
`pmustress report --group-by KEY` (and `compare --group-by KEY`): a fleet's
runs pooled by what they ran on (host, instance type, kernel release,
pseudo-NMI verdict), one row per group with the pooled dropped rate and
its exact interval. "Very frequently on c6g.12xlarge, very infrequently on
c7g.12xlarge" becomes two rows with numbers.

Pooling adds overflows and drops of the finished runs. Self-test runs
(`--inject-drop-every`) are counted as runs but never pooled: their drops
were made on purpose. A run that did not finish has no counts: it is
counted, named, and keeps its group from being called clean. A run that
could not start (no PMU, no permission: run.json's `setup_failure`) is
a finding of its own, counted with its reason; a group of such runs
alone could not start, rather than being inconclusive.
A run given twice (or a copy of it) is counted once, and the repeat named.
*/

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::domain::{CONFIDENCE, GroupBy};
use crate::report::answers::rate_short;
use crate::report::format::escape::printable;
use crate::report::format::markup::{Column, Markup, Report, Table, Width};
use crate::report::format::text::WIDTH;
use crate::results::loaded::LoadedRun;
use crate::results::reader::verdict_name;
use crate::results::schema::Verdict;
use crate::stats::Rate;

/// What a group key is called when a run's fingerprint does not say
/// (older results have no hostname; a VM may have no DMI).
pub const UNKNOWN_KEY: &str = "unknown";

/// One group: its runs, pooled.
#[derive(Debug, Clone, Serialize)]
pub struct GroupRow {
    pub key: String,
    pub runs: usize,
    /// Runs by their own verdict ("clean": 3, "dropped": 1).
    pub verdicts: BTreeMap<&'static str, usize>,
    /// Self-test runs: counted here, left out of the pooled numbers.
    pub self_tests: usize,
    /// Runs that could not start, by why (run.json's `setup_failure`);
    /// counted in `verdicts` as "could not start".
    pub could_not_start: BTreeMap<String, usize>,
    /// Pooled over the finished runs that are not self-tests.
    pub overflows: u64,
    pub dropped: u64,
    pub rate: Rate,
    /// dropped if any pooled run dropped an interrupt; clean if every run
    /// was clean; "could not start" if no run could; otherwise
    /// inconclusive.
    pub verdict: &'static str,
    pub dirs: Vec<String>,
}

/// The whole grouped report, as `--format json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Grouped {
    pub group_by: GroupBy,
    pub groups: Vec<GroupRow>,
    /// Directories left out as the same run as one before them:
    /// (this one, the one counted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<(String, String)>,
}

/// What makes two results directories one run: the same run.json file
/// (the directory given twice, by another path, or hard-linked), or for a
/// copy the same host and start, to the CLOCK_MONOTONIC nanosecond, which
/// no two runs share.
#[derive(PartialEq, Eq, Hash)]
enum Identity {
    File(u64, u64),
    Start(String, u64, u64),
}

fn identities(run: &LoadedRun) -> Vec<Identity> {
    use std::os::unix::fs::MetadataExt as _;
    let mut ids = Vec::new();
    if let Ok(m) = std::fs::metadata(run.dir.join("run.json")) {
        ids.push(Identity::File(m.dev(), m.ino()));
    }
    if let Some(r) = run.run.results()
        && let (Some(unix_s), Some(mono)) = (r.started_unix_s, r.started_monotonic_ns)
    {
        let host = run.fingerprint_str("/kernel/hostname/value").unwrap_or("");
        ids.push(Identity::Start(host.to_string(), unix_s, mono));
    }
    ids
}

/// The runs with each run once: pooling one run's counts twice (given
/// three times, or as a copy) tripled its overflows and its weight.
fn distinct(runs: &[LoadedRun]) -> (Vec<&LoadedRun>, Vec<(String, String)>) {
    let mut seen: std::collections::HashMap<Identity, &LoadedRun> = Default::default();
    let (mut kept, mut duplicates) = (Vec::new(), Vec::new());
    for r in runs {
        let ids = identities(r);
        if let Some(first) = ids.iter().find_map(|id| seen.get(id)) {
            duplicates.push((r.dir.display().to_string(), first.dir.display().to_string()));
            continue;
        }
        for id in ids {
            seen.insert(id, r);
        }
        kept.push(r);
    }
    (kept, duplicates)
}

/// The key's name as the flag spells it.
pub fn key_name(by: GroupBy) -> &'static str {
    match by {
        GroupBy::Host => "host",
        GroupBy::InstanceType => "instance-type",
        GroupBy::Kernel => "kernel",
        GroupBy::PseudoNmi => "pseudo-nmi",
    }
}

/// `compare --group-by`: the runs under key `a` and under key `b`, in that
/// order; a key no run has is an error naming the keys there are.
pub fn pick_two(
    runs: Vec<LoadedRun>,
    by: GroupBy,
    a: &Path,
    b: &Path,
) -> Result<Vec<Vec<LoadedRun>>> {
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    if a == b {
        bail!("A and B are the same group ({} {a})", key_name(by));
    }
    let mut keys = std::collections::BTreeSet::new();
    let (mut in_a, mut in_b) = (Vec::new(), Vec::new());
    // Each run once, as `group` pools them.
    let mut seen = std::collections::HashSet::new();
    for r in runs {
        let ids = identities(&r);
        if ids.iter().any(|id| seen.contains(id)) {
            continue;
        }
        seen.extend(ids);
        let key = key_of(&r, by);
        if key == a {
            in_a.push(r);
        } else if key == b {
            in_b.push(r);
        }
        keys.insert(key);
    }
    for (key, members) in [(&a, &in_a), (&b, &in_b)] {
        if members.is_empty() {
            let there: Vec<&str> = keys.iter().map(String::as_str).collect();
            bail!(
                "no run has {} {key:?}; the runs' {} keys are: {}",
                key_name(by),
                key_name(by),
                there.join(", ")
            );
        }
    }
    Ok(vec![in_a, in_b])
}

/// The key a run falls under.
pub fn key_of(run: &LoadedRun, by: GroupBy) -> String {
    let pseudo_nmi = run.run.pseudo_nmi().map(|p| p.verdict.as_str());
    key_from(run.run.fingerprint(), pseudo_nmi, by)
}

/// The key of a result measured on the machine `fingerprint` describes
/// (a run's, a check's), its pseudo-NMI verdict as the result holds it.
pub fn key_from(fingerprint: &serde_json::Value, pseudo_nmi: Option<&str>, by: GroupBy) -> String {
    let field = |pointer: &str| {
        fingerprint
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
    };
    let key = match by {
        GroupBy::Host => field("/kernel/hostname/value"),
        GroupBy::InstanceType => field("/machine/dmi/product_name/value"),
        GroupBy::Kernel => field("/kernel/release/value"),
        GroupBy::PseudoNmi => pseudo_nmi,
    };
    match key.map(str::trim) {
        Some(k) if !k.is_empty() => k.to_string(),
        _ => UNKNOWN_KEY.to_string(),
    }
}

/// What a run that could not start is counted as.
const COULD_NOT_START: &str = "could not start";

/// The runs pooled by `by`, groups in key order; sums past 2^64 are an
/// error, never a wrapped number.
pub fn group(runs: &[LoadedRun], by: GroupBy) -> Result<Grouped> {
    let mut by_key: BTreeMap<String, Vec<&LoadedRun>> = BTreeMap::new();
    let (runs, duplicates) = distinct(runs);
    for r in runs {
        by_key.entry(key_of(r, by)).or_default().push(r);
    }
    let groups = by_key
        .into_iter()
        .map(|(key, members)| pool(key, &members))
        .collect::<Result<_>>()?;
    Ok(Grouped {
        group_by: by,
        groups,
        duplicates,
    })
}

fn pool(key: String, members: &[&LoadedRun]) -> Result<GroupRow> {
    let mut verdicts = BTreeMap::new();
    let (mut overflows, mut dropped, mut self_tests) = (0u64, 0u64, 0);
    let mut all_clean = true;
    let mut could_not_start = BTreeMap::new();
    for r in members {
        if let Some(why) = r.run.setup_failure() {
            *could_not_start.entry(why.to_string()).or_insert(0) += 1;
        }
        let outcome = match r.run.setup_failure() {
            Some(_) => COULD_NOT_START,
            None => verdict_name(r.run.verdict()),
        };
        *verdicts.entry(outcome).or_insert(0) += 1;
        if r.run.is_self_test() {
            self_tests += 1;
            continue;
        }
        all_clean &= r.run.verdict() == Verdict::Clean;
        if !r.run.finished() {
            continue;
        }
        overflows = overflows
            .checked_add(r.overflows())
            .with_context(|| format!("{key}: the runs' overflows add up past 2^64 - 1"))?;
        dropped = dropped
            .checked_add(r.dropped())
            .with_context(|| format!("{key}: the runs' drops add up past 2^64 - 1"))?;
    }
    // A group of self-tests alone proves nothing of the machines.
    let verdict = crate::verdict::pooled(dropped, all_clean && self_tests < members.len());
    let started = members.len() - could_not_start.values().sum::<usize>();
    let verdict = match started {
        0 => COULD_NOT_START,
        _ => verdict_name(verdict),
    };
    Ok(GroupRow {
        runs: members.len(),
        verdicts,
        self_tests,
        could_not_start,
        overflows,
        dropped,
        rate: Rate::new(dropped, overflows, CONFIDENCE),
        verdict,
        dirs: members
            .iter()
            .map(|r| r.dir.display().to_string())
            .collect(),
        key,
    })
}

/// The grouped report: one row per group, as a table (in text at most 72
/// columns: a key too long for one row gets a line of its own above its
/// numbers), then what the table leaves out; JSON is `Grouped` itself.
impl Report for Grouped {
    fn write(&self, m: &mut dyn Markup) {
        let g = self;
        let mut table = Table::new(vec![
            Column::left(key_name(g.group_by), Width::Widest),
            Column::right("runs", Width::Fixed(4)),
            Column::right("overflows", Width::Fixed(11)),
            Column::right("dropped", Width::Fixed(7)),
            Column::left("per million (95% CI)", Width::Fixed(20)).markdown_right(),
            Column::left("verdict", Width::Cell),
        ]);
        table.fold_wider_than = Some(WIDTH);
        for r in &g.groups {
            table.row(vec![
                printable(&r.key).into_owned(),
                r.runs.to_string(),
                r.overflows.to_string(),
                r.dropped.to_string(),
                rate_short(r.overflows, r.dropped),
                r.verdict.to_string(),
            ]);
        }
        m.table(&table);
        let notes = notes(g);
        if !notes.is_empty() {
            m.blank();
        }
        for n in notes {
            m.note(&n);
        }
    }
}

/// What the table leaves out: runs counted once, verdicts not pooled,
/// runs that could not start and self-tests.
fn notes(g: &Grouped) -> Vec<String> {
    let mut notes = Vec::new();
    for (dup, first) in &g.duplicates {
        notes.push(format!("{dup} is the same run as {first}: counted once"));
    }
    for r in &g.groups {
        let other: Vec<String> = r
            .verdicts
            .iter()
            .filter(|(v, _)| !matches!(**v, "clean" | "dropped" | COULD_NOT_START))
            .map(|(v, n)| match *v {
                "interrupted" => format!("{n} interrupted (pooled as far as it ran)"),
                "incomplete" => format!("{n} incomplete (not pooled: no counts)"),
                _ => format!("{n} {v}"),
            })
            .collect();
        if !other.is_empty() {
            notes.push(format!("{}: {}", r.key, other.join(", ")));
        }
        for (why, n) in &r.could_not_start {
            notes.push(format!("{}: {n} could not start: {why}", r.key));
        }
        if r.self_tests > 0 {
            notes.push(format!(
                "{}: {} self-test {} (injected drops) left out of the pooled numbers",
                r.key,
                r.self_tests,
                if r.self_tests == 1 { "run" } else { "runs" }
            ));
        }
    }
    notes
}
