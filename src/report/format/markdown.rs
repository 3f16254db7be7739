//! The markdown format: a report pasted into an issue or a wiki, lists
//! and tables as markdown renders them, lines wrapped as text's are.

use std::fmt::Write as _;

use crate::report::answers::{Answer, rate_cells};
use crate::report::format::escape::printable;
use crate::report::format::markup::{Align, Markup, Table};
use crate::report::format::text::wrap_into;

#[derive(Debug, Default)]
pub struct Markdown {
    out: String,
}

impl Markup for Markdown {
    fn title(&mut self, text: &str) {
        let _ = writeln!(self.out, "## {text}\n");
    }

    fn heading(&mut self, text: &str) {
        let _ = writeln!(self.out, "### {}\n", printable(text));
    }

    fn fact(&mut self, text: &str) {
        wrap_into(&mut self.out, text, "- ");
    }

    fn detail(&mut self, text: &str) {
        wrap_into(&mut self.out, text, "  - ");
    }

    fn item(&mut self, text: &str) {
        wrap_into(&mut self.out, text, "- ");
    }

    fn warning(&mut self, text: &str) {
        let _ = writeln!(self.out, "- **warning**: {text}");
    }

    fn note(&mut self, text: &str) {
        wrap_into(&mut self.out, text, "- ");
    }

    fn line(&mut self, text: &str) {
        let _ = writeln!(self.out, "{text}");
    }

    fn blank(&mut self) {
        self.out.push('\n');
    }

    fn paragraph_end(&mut self) {
        self.out.push('\n');
    }

    /// Indented by four: a code block, whose columns stay aligned.
    fn listing(&mut self, line: &str) {
        let _ = writeln!(self.out, "    {line}");
    }

    fn command(&mut self, _words: &[String], line: &str) {
        let _ = writeln!(self.out, "\nreproduce:\n\n```\n{line}\n```\n");
    }

    fn chart(&mut self, caption: &str, lines: &[String]) {
        let _ = writeln!(self.out, "{caption}\n```");
        for l in lines {
            let _ = writeln!(self.out, "{l}");
        }
        let _ = writeln!(self.out, "```");
    }

    fn table(&mut self, table: &Table) {
        let titles: Vec<&str> = table.columns.iter().map(|c| c.title.as_str()).collect();
        row(&mut self.out, &titles);
        self.out.push('|');
        for c in &table.columns {
            self.out.push_str(match c.markdown_align {
                Align::Left => "---|",
                Align::Right => "---:|",
            });
        }
        self.out.push('\n');
        for r in &table.rows {
            let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
            let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
            row(&mut self.out, &cells);
        }
    }

    fn answers(&mut self, rows: &[Answer]) {
        let _ = writeln!(self.out, "| | count | of | per million | exact 95% CI |");
        let _ = writeln!(self.out, "|---|---:|---:|---:|---:|");
        for a in rows {
            let (pm, ci) = rate_cells(a.trials, a.events);
            let _ = writeln!(
                self.out,
                "| {} | {} | {} {} | {pm} | {ci} |",
                a.label, a.events, a.trials, a.of
            );
        }
        let _ = writeln!(
            self.out,
            "\nSpurious: sample records no driver behaviour explains (such as a second interrupt for one overflow); unmatched: signals with no interrupt of their own.\n"
        );
    }

    fn text(&self) -> &str {
        &self.out
    }
}

/// "| a | b |"; an empty cell is "| |".
fn row(out: &mut String, cells: &[&str]) {
    out.push('|');
    for c in cells {
        if c.is_empty() {
            out.push_str(" |");
        } else {
            let _ = write!(out, " {c} |");
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::format::markup::{Column, Width};

    #[test]
    fn a_table_escapes_pipes_and_aligns_by_its_own_rule() {
        let mut t = Table::new(vec![
            Column::left("", Width::Fixed(8)),
            Column::left("rate", Width::Fixed(20)).markdown_right(),
            Column::left("lost", Width::Cell).text_title("l"),
        ]);
        t.row(vec!["a|b".into(), "1.0".into(), "-".into()]);
        let mut m = Markdown::default();
        m.table(&t);
        assert_eq!(
            m.text(),
            "| | rate | lost |\n|---|---:|---|\n| a\\|b | 1.0 | - |\n"
        );
    }
}
