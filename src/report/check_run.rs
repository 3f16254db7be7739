//! The lines of a `pmustress check` as it ends (`report` reads a check
//! back in `checks`).

use crate::check::document::CheckDocument;
use crate::check::outcome::{Finding, Fitness, Status, Use, finding_line, verdict_words};
use crate::report::format::markup::{Markup, Report};

/// The lines `pmustress check` prints: a heading, one line per probe
/// (and for a finding that is not a PASS, what was expected and what to
/// do), the verdict per use, and where the evidence is. Every format but
/// JSON (check.json itself) prints them as they are.
impl Report for CheckDocument<'_> {
    fn write(&self, m: &mut dyn Markup) {
        for line in lines(self).lines() {
            m.line(line);
        }
    }
}

fn lines(doc: &CheckDocument<'_>) -> String {
    let dir = &doc.dir;
    let mut out = String::new();
    let b = doc.battery;
    out.push_str(&format!(
        "pmustress check: {} ({}), counting {}\n",
        b.core,
        doc.fingerprint
            .kernel
            .release
            .value
            .as_deref()
            .unwrap_or("kernel unknown"),
        b.counted.as_deref().unwrap_or("nothing")
    ));
    for f in &b.findings {
        out.push_str(&finding_lines(f));
    }
    let say = |u: Use, f: &Fitness| {
        let (fitness, because) = f.parts();
        verdict_words(u.as_str(), fitness, because)
    };
    let verdict = if b.tested {
        format!(
            "{}; {}",
            say(Use::Rr, &doc.rr),
            say(Use::Profiler, &doc.profiler)
        )
    } else {
        "could not test the PMU here".to_string()
    };
    out.push_str(&format!(
        "verdict: {verdict} (exit {}, --for {})\n",
        doc.exit_status,
        match doc.for_uses.as_slice() {
            [Use::Rr] => "rr",
            [Use::Profiler] => "profiler",
            _ => "all",
        }
    ));
    if let Some(sig) = doc.interrupted_by {
        out.push_str(&format!(
            "stopped by signal {sig}: the probes not run are missing\n"
        ));
    }
    out.push_str(&format!("results: {}\n", dir.join("check.json").display()));
    out
}

/// A finding's line, and for one that is not a PASS a second with what
/// was expected and what to do.
fn finding_lines(f: &Finding) -> String {
    let mut line = finding_line(f.status.as_str(), f.probe, &f.evidence) + "\n";
    if f.status != Status::Pass {
        let mut more = Vec::new();
        if !f.expectation.is_empty() && f.status != Status::Skip {
            more.push(format!("expected {}", f.expectation));
        }
        if let Some(r) = &f.remedy {
            more.push(r.clone());
        }
        if !more.is_empty() {
            line.push_str(&format!("     {:<13} {}\n", "", more.join("; ")));
        }
    }
    line
}
