//! The JSON format: a report's own data, serialised as it is (what
//! scripts read instead of parsing the text).

use serde::Serialize;

pub fn render(report: &impl Serialize) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(report)
}
