//! `report` of `pmustress check` directories: each check's verdicts and
//! findings, or with `--group-by` one row per group (an instance type, a
//! host...): how many checks, how many found the machine fit for rr and
//! for sampling profilers, and the stress's lost overflows per overflow.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::Serialize;
use serde_json::Value;

use crate::check::outcome::{Use, finding_line, verdict_words};
use crate::domain::GroupBy;
use crate::report::format::escape::printable;
use crate::report::format::markup::{Column, Markup, Report, Table, Width};
use crate::report::groups::{key_from, key_name};
use crate::report::runs::RunsReport;
use crate::results::reader::read_bounded;

/// check.json is some kilobytes and the fingerprint; a bigger one is not
/// ours.
const MAX_CHECK_JSON_BYTES: u64 = 16 << 20;

/// One check as read back.
pub struct LoadedCheck {
    pub dir: PathBuf,
    doc: Value,
}

impl LoadedCheck {
    /// Reads DIR/check.json, refusing what `pmustress check` does not write.
    pub fn load(dir: &Path) -> Result<LoadedCheck> {
        let path = dir.join("check.json");
        let bytes = read_bounded(&path, MAX_CHECK_JSON_BYTES)?;
        let doc: Value = serde_json::from_slice(&bytes)
            .with_context(|| format!("{}: not JSON", path.display()))?;
        if doc["schema"] != "pmustress-check" || !doc["findings"].is_array() {
            bail!("{}: not a check.json pmustress writes", path.display());
        }
        Ok(LoadedCheck {
            dir: dir.to_path_buf(),
            doc,
        })
    }

    fn fitness(&self, use_: &str) -> &str {
        self.doc[use_]["fitness"].as_str().unwrap_or("unknown")
    }

    fn because(&self, use_: &str) -> Vec<&str> {
        self.doc[use_]["because"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// (dropped, overflows) of its stress, when it ran one.
    fn stress(&self) -> Option<(u64, u64)> {
        let f = self.doc["findings"]
            .as_array()?
            .iter()
            .find(|f| f["probe"] == "lost_overflow" && f["status"] != "SKIP")?;
        Some((
            f["numbers"]["dropped"].as_u64()?,
            f["numbers"]["overflows"].as_u64()?,
        ))
    }

    /// The group it falls under, as a run on the same machine would.
    fn key(&self, by: GroupBy) -> String {
        let fingerprint = &self.doc["fingerprint"];
        let pseudo_nmi = fingerprint["pseudo_nmi"]["verdict"].as_str();
        key_from(fingerprint, pseudo_nmi, by)
    }
}

/// `report` of checks and any runs given beside them: each check's
/// verdicts and findings (or with `group_by`, one row per group), then
/// the runs' report. JSON: the checks' directories, the groups, and the
/// runs' summaries.
pub struct ChecksReport<'a> {
    pub checks: &'a [LoadedCheck],
    pub group_by: Option<GroupBy>,
    pub runs: RunsReport<'a>,
}

impl Serialize for ChecksReport<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let rows = self.group_by.map(|by| group(self.checks, by));
        serde_json::json!({
            "checks": self.checks.iter().map(|c| c.dir.display().to_string()).collect::<Vec<_>>(),
            "groups": rows,
            "runs": &self.runs,
        })
        .serialize(s)
    }
}

impl Report for ChecksReport<'_> {
    fn write(&self, m: &mut dyn Markup) {
        match self.group_by {
            Some(by) => group_rows(m, &group(self.checks, by), by),
            None => sections(m, self.checks),
        }
        if !self.runs.runs.is_empty() {
            m.blank();
            self.runs.write(m);
        }
    }
}

/// Each check: its verdicts, then one line per finding.
fn sections(m: &mut dyn Markup, checks: &[LoadedCheck]) {
    for c in checks {
        m.title(&format!(
            "check {}",
            printable(&c.dir.display().to_string())
        ));
        let say = |u: Use| {
            let key = match u {
                Use::Rr => "rr",
                Use::Profiler => "profiler",
            };
            verdict_words(u.as_str(), c.fitness(key), &c.because(key))
        };
        m.line(&format!(
            "{}; {} (exit {})",
            say(Use::Rr),
            say(Use::Profiler),
            c.doc["exit_status"]
        ));
        for f in c.doc["findings"].as_array().into_iter().flatten() {
            m.listing(&finding_line(
                f["status"].as_str().unwrap_or("?"),
                f["probe"].as_str().unwrap_or("?"),
                &printable(f["evidence"].as_str().unwrap_or("")),
            ));
        }
        m.blank();
    }
}

/// One group's row.
#[derive(Debug, Serialize)]
pub struct CheckRow {
    pub key: String,
    pub checks: u64,
    pub fit_for_rr: u64,
    pub fit_for_profilers: u64,
    /// Over the checks whose stress ran.
    pub dropped: u64,
    pub overflows: u64,
}

pub fn group(checks: &[LoadedCheck], by: GroupBy) -> Vec<CheckRow> {
    let mut rows: Vec<CheckRow> = Vec::new();
    for c in checks {
        let key = c.key(by);
        let at = match rows.iter().position(|r| r.key == key) {
            Some(i) => i,
            None => {
                rows.push(CheckRow {
                    key,
                    checks: 0,
                    fit_for_rr: 0,
                    fit_for_profilers: 0,
                    dropped: 0,
                    overflows: 0,
                });
                rows.len() - 1
            }
        };
        let r = &mut rows[at];
        r.checks += 1;
        r.fit_for_rr += (c.fitness("rr") == "fit") as u64;
        r.fit_for_profilers += (c.fitness("profiler") == "fit") as u64;
        if let Some((dropped, overflows)) = c.stress() {
            r.dropped += dropped;
            r.overflows += overflows;
        }
    }
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    rows
}

fn group_rows(m: &mut dyn Markup, rows: &[CheckRow], by: GroupBy) {
    let lost = |r: &CheckRow| {
        if r.overflows == 0 {
            "-".to_string()
        } else {
            format!("{} / {}", r.dropped, r.overflows)
        }
    };
    let mut table = Table::new(vec![
        Column::left(key_name(by), Width::Widest),
        Column::right("checks", Width::Fixed(6)),
        Column::right("fit for rr", Width::Fixed(6))
            .text_title("rr-fit")
            .gap(2),
        Column::right("fit for profilers", Width::Fixed(12))
            .text_title("profiler-fit")
            .gap(2),
        Column::left("lost / overflows", Width::Cell)
            .text_title("lost/overflows")
            .gap(2)
            .markdown_right(),
    ]);
    for r in rows {
        table.row(vec![
            printable(&r.key).into_owned(),
            r.checks.to_string(),
            r.fit_for_rr.to_string(),
            r.fit_for_profilers.to_string(),
            lost(r),
        ]);
    }
    m.table(&table);
}
