/*!
Output formats, one file each, and the one place a format is picked.

A report (`markup::Report`) writes itself once, in the blocks of
`markup::Markup`; `text` and `markdown` are the two implementations of
those blocks, and `json` serialises the report's own data instead. Adding
a format is a file here and a line in `render`. `escape` is what every
format does to text read from files.
*/

pub mod escape;
pub mod json;
pub mod markdown;
pub mod markup;
pub mod text;

use serde::Serialize;

use crate::domain::OutputFormat;
use crate::report::format::markdown::Markdown;
use crate::report::format::markup::{Markup, Report};
use crate::report::format::text::Text;

/// `report` in `format`, ending in exactly one newline.
pub fn render<R: Report + Serialize>(
    report: &R,
    format: OutputFormat,
) -> Result<String, serde_json::Error> {
    let text = match format {
        OutputFormat::Text => written(report, Text::default()),
        OutputFormat::Markdown => written(report, Markdown::default()),
        OutputFormat::Json => json::render(report)?,
    };
    Ok(format!("{}\n", text.trim_end()))
}

/// `report` as text: what a report with no other form (a mail) renders.
pub fn render_text(report: &dyn Report) -> String {
    format!("{}\n", written(report, Text::default()).trim_end())
}

fn written<R: Report + ?Sized>(report: &R, mut m: impl Markup) -> String {
    report.write(&mut m);
    m.text().to_string()
}
