//! check.json: what `pmustress check` records of itself, the battery's
//! findings and verdicts with the settings and the machine's fingerprint.

use std::path::PathBuf;

use serde::Serialize;

use crate::check::Battery;
use crate::check::outcome::{Fitness, Use};
use crate::fingerprint::Fingerprint;

/// check.json's `schema_version`: bumped when a field changes meaning.
pub const CHECK_SCHEMA_VERSION: u32 = 1;

/// check.json.
#[derive(Serialize)]
pub struct CheckDocument<'a> {
    pub schema: &'static str,
    pub schema_version: u32,
    pub argv: Vec<String>,
    /// The uses the exit status answers for.
    #[serde(rename = "for")]
    pub for_uses: Vec<Use>,
    pub quick: bool,
    pub stress_duration_s: f64,
    pub rr: Fitness,
    pub profiler: Fitness,
    pub exit_status: i32,
    /// The signal that stopped the check, if one did.
    pub interrupted_by: Option<i32>,
    #[serde(flatten)]
    pub battery: &'a Battery,
    /// The stress's results directory, relative to this one.
    pub stress_dir: Option<&'static str>,
    pub fingerprint: &'a Fingerprint,
    /// Where check.json is written (its own directory).
    #[serde(skip)]
    pub dir: PathBuf,
}
