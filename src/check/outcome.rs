//! What one probe found, and what the battery's findings make of the two
//! uses: rr (its ticks event, exact counts, a bounded skid) and a sampling
//! profiler (overflows that arrive, on time, without loss).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::{EXIT_CANNOT_TEST, EXIT_CLEAN, EXIT_DROPPED};

/// A probe's finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Warn,
    Fail,
    Skip,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// A tool that relies on the PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Use {
    Rr,
    Profiler,
}

impl Use {
    pub fn as_str(self) -> &'static str {
        match self {
            Use::Rr => "rr",
            Use::Profiler => "sampling profilers",
        }
    }
}

/// One probe's line: what was measured against what was expected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The probe's name (`counts`, `skid`...).
    pub probe: &'static str,
    pub status: Status,
    /// The uses a FAIL here makes unfit (empty unless FAIL).
    pub unfit_for: Vec<Use>,
    /// The uses this probe could not decide though it ran (a stress too
    /// short to conclude): they are neither fit nor unfit.
    pub undecided_for: Vec<Use>,
    /// What was measured, in words with the numbers.
    pub evidence: String,
    /// The known answer, and where it comes from (rr's rule, the driver).
    pub expectation: String,
    /// For FAIL, WARN and SKIP: what a user can do.
    pub remedy: Option<String>,
    /// The measured numbers, by name.
    pub numbers: BTreeMap<&'static str, u64>,
}

impl Finding {
    fn new(probe: &'static str, status: Status, evidence: String, expectation: &str) -> Finding {
        Finding {
            probe,
            status,
            unfit_for: Vec::new(),
            undecided_for: Vec::new(),
            evidence,
            expectation: expectation.to_string(),
            remedy: None,
            numbers: BTreeMap::new(),
        }
    }

    pub fn pass(probe: &'static str, evidence: String, expectation: &str) -> Finding {
        Finding::new(probe, Status::Pass, evidence, expectation)
    }

    pub fn warn(probe: &'static str, evidence: String, expectation: &str) -> Finding {
        Finding::new(probe, Status::Warn, evidence, expectation)
    }

    /// A FAIL that makes `uses` unfit.
    pub fn fail(probe: &'static str, uses: &[Use], evidence: String, expectation: &str) -> Finding {
        let mut f = Finding::new(probe, Status::Fail, evidence, expectation);
        f.unfit_for = uses.to_vec();
        f
    }

    /// Not measured: `why`, and what would let it be.
    pub fn skip(probe: &'static str, why: String, remedy: Option<String>) -> Finding {
        let mut f = Finding::new(probe, Status::Skip, why, "");
        f.remedy = remedy;
        f
    }

    /// A WARN that leaves `uses` undecided.
    pub fn undecided(
        probe: &'static str,
        uses: &[Use],
        evidence: String,
        expectation: &str,
    ) -> Finding {
        let mut f = Finding::new(probe, Status::Warn, evidence, expectation);
        f.undecided_for = uses.to_vec();
        f
    }

    pub fn remedy(mut self, remedy: impl Into<String>) -> Finding {
        self.remedy = Some(remedy.into());
        self
    }

    pub fn number(mut self, name: &'static str, value: u64) -> Finding {
        self.numbers.insert(name, value);
        self
    }
}

/// What the battery says of one use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "fitness", rename_all = "snake_case")]
pub enum Fitness {
    Fit,
    /// The probes whose FAIL made it unfit.
    Unfit {
        because: Vec<&'static str>,
    },
    /// The PMU could not be measured here (none, or no permission).
    Untested,
    /// Nothing failed, but these probes could not conclude.
    Undecided {
        because: Vec<&'static str>,
    },
}

impl Fitness {
    /// The use's fitness from every finding; `tested` is false when the
    /// PMU could not be measured at all.
    pub fn of(use_: Use, findings: &[Finding], tested: bool) -> Fitness {
        if !tested {
            return Fitness::Untested;
        }
        let because: Vec<&'static str> = findings
            .iter()
            .filter(|f| f.unfit_for.contains(&use_))
            .map(|f| f.probe)
            .collect();
        if !because.is_empty() {
            return Fitness::Unfit { because };
        }
        let because: Vec<&'static str> = findings
            .iter()
            .filter(|f| f.undecided_for.contains(&use_))
            .map(|f| f.probe)
            .collect();
        if because.is_empty() {
            Fitness::Fit
        } else {
            Fitness::Undecided { because }
        }
    }
}

impl Fitness {
    /// check.json's `fitness` word, and the probes behind it.
    pub fn parts(&self) -> (&'static str, &[&'static str]) {
        match self {
            Fitness::Fit => ("fit", &[]),
            Fitness::Unfit { because } => ("unfit", because),
            Fitness::Untested => ("untested", &[]),
            Fitness::Undecided { because } => ("undecided", because),
        }
    }
}

/// One use's verdict in words, from check.json's `fitness` word and its
/// probes: what `check` prints and what `report` prints of a check.
pub fn verdict_words(use_name: &str, fitness: &str, because: &[&str]) -> String {
    match fitness {
        "fit" => format!("fit for {use_name}"),
        "unfit" => format!("not fit for {use_name} ({})", because.join(", ")),
        "undecided" => format!("{use_name} undecided ({})", because.join(", ")),
        other => format!("{use_name} {other}"),
    }
}

/// One finding's line: its status, the probe, what was measured.
pub fn finding_line(status: &str, probe: &str, evidence: &str) -> String {
    format!("{status} {probe:<13} {evidence}")
}

/// The uses the exit status answers for (`--for`): unfit is 1 whatever
/// else could not be decided; untested or undecided, 125.
pub fn exit_status(asked: &[(Use, Fitness)]) -> i32 {
    if asked
        .iter()
        .any(|(_, f)| matches!(f, Fitness::Unfit { .. }))
    {
        EXIT_DROPPED
    } else if asked
        .iter()
        .any(|(_, f)| matches!(f, Fitness::Untested | Fitness::Undecided { .. }))
    {
        EXIT_CANNOT_TEST
    } else {
        EXIT_CLEAN
    }
}
