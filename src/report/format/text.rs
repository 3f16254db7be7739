//! The text format: what a mailing list reads, at most `WIDTH` columns,
//! no colour, every line wrapped between words.

use std::fmt::Write as _;

use crate::report::answers::{Answer, answer_rate};
use crate::report::format::escape::printable;
use crate::report::format::markup::{Align, Markup, Table, Width};

/// A report's lines fit a mail: at most this many columns.
pub const WIDTH: usize = 72;

/// What a terminal's lines are wrapped to (a run's end, a replay), with
/// the continuation indented.
pub const TERMINAL_WIDTH: usize = 100;

#[derive(Debug, Default)]
pub struct Text {
    out: String,
}

impl Markup for Text {
    fn title(&mut self, text: &str) {
        let _ = writeln!(self.out, "{text}");
    }

    fn heading(&mut self, text: &str) {
        wrap_into(&mut self.out, &format!("== {text}"), "");
    }

    fn fact(&mut self, text: &str) {
        wrap_into(&mut self.out, text, "");
    }

    fn detail(&mut self, text: &str) {
        wrap_into(&mut self.out, text, "  ");
    }

    fn item(&mut self, text: &str) {
        wrap_into(&mut self.out, text, "  ");
    }

    fn warning(&mut self, text: &str) {
        wrap_into(&mut self.out, &format!("warning: {text}"), "");
    }

    fn note(&mut self, text: &str) {
        wrap_into(&mut self.out, &format!("note: {text}"), "");
    }

    fn line(&mut self, text: &str) {
        let _ = writeln!(self.out, "{text}");
    }

    fn blank(&mut self) {
        self.out.push('\n');
    }

    fn paragraph_end(&mut self) {}

    fn listing(&mut self, line: &str) {
        let _ = writeln!(self.out, "  {line}");
    }

    fn command(&mut self, words: &[String], _line: &str) {
        reproduce_lines(&mut self.out, words);
    }

    fn chart(&mut self, caption: &str, lines: &[String]) {
        let _ = writeln!(self.out, "{caption}");
        for l in lines {
            let _ = writeln!(self.out, "{l}");
        }
    }

    fn table(&mut self, table: &Table) {
        table_into(&mut self.out, table);
    }

    fn answers(&mut self, rows: &[Answer]) {
        answers_into(&mut self.out, rows);
    }

    fn text(&self) -> &str {
        &self.out
    }
}

/// `text` wrapped to `WIDTH` columns after `indent`, continuation lines
/// indented by four.
pub fn wrap_into(out: &mut String, text: &str, indent: &str) {
    // Never at a hyphen: "--inject-drop-every" and "late-signal" are
    // names; only a word longer than the line is broken.
    let opts = textwrap::Options::new(WIDTH)
        .initial_indent(indent)
        .subsequent_indent("    ")
        .break_words(true)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    for line in textwrap::wrap(&printable(text), opts) {
        let _ = writeln!(out, "{line}");
    }
}

/// `text`, each line wrapped to `TERMINAL_WIDTH` columns between words (a
/// word longer than that, such as a path, is kept whole).
pub fn fit(text: &str) -> String {
    // Never at a hyphen: "late-signal" and "--inject-drop-every" are
    // names, split they read as two words.
    let opts = textwrap::Options::new(TERMINAL_WIDTH)
        .subsequent_indent("    ")
        .break_words(false)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let mut out = String::new();
    for line in text.lines() {
        for part in textwrap::wrap(line, &opts) {
            out.push_str(&part);
            out.push('\n');
        }
    }
    out
}

/// "reproduce: <command>", wrapped only between arguments, each line but
/// the last ending in " \\": copied as it is, it is the command.
fn reproduce_lines(out: &mut String, argv: &[String]) {
    let mut line = String::from("reproduce:");
    for word in argv {
        if line.len() + 1 + word.len() + 2 > WIDTH && line.contains(' ') {
            let _ = writeln!(out, "{line} \\");
            line = String::from("   ");
        }
        line.push(' ');
        line.push_str(word);
    }
    let _ = writeln!(out, "{line}");
}

/// The answers as lines of at most `WIDTH` columns: a heading, one
/// aligned row each, and what "spurious" means.
pub fn answers_into(out: &mut String, rows: &[Answer]) {
    let _ = writeln!(
        out,
        "lost and spurious interrupts, per million (exact 95% interval):"
    );
    let counts: Vec<String> = rows
        .iter()
        .map(|a| format!("{} of {} {}", a.events, a.trials, a.of))
        .collect();
    let count_width = counts.iter().map(String::len).max().unwrap_or(0);
    for (a, count) in rows.iter().zip(&counts) {
        let line = format!("{:<21} {count:<count_width$}  {}", a.label, answer_rate(a));
        wrap_into(out, &line, "  ");
    }
    wrap_into(
        out,
        "(spurious: sample records no driver behaviour explains, e.g. a second interrupt for one overflow)",
        "  ",
    );
}

/// The table in fixed columns: each padded to its width and aligned,
/// after its gap; folded (the first cell on a line of its own) where a
/// row would pass `fold_wider_than`.
fn table_into(out: &mut String, table: &Table) {
    let cols = &table.columns;
    let title = |i: usize| cols[i].text_title.as_deref().unwrap_or(&cols[i].title);
    let header: Vec<String> = (0..cols.len()).map(|i| title(i).to_string()).collect();
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| match c.width {
            Width::Cell => 0,
            Width::Fixed(w) => w,
            Width::Widest => table
                .rows
                .iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0),
        })
        .collect();
    // The cells after the first, joined: what a folded row indents.
    let rest = |row: &[String]| {
        let mut s = String::new();
        for (i, cell) in row.iter().enumerate().skip(1) {
            if i > 1 {
                s.push_str(&" ".repeat(cols[i].gap));
            }
            pad(&mut s, cell, widths[i], cols[i].text_align);
        }
        s
    };
    let lines: Vec<(&str, String)> = std::iter::once(&header)
        .chain(&table.rows)
        .map(|r| (r[0].as_str(), rest(r)))
        .collect();
    let folds = table.fold_wider_than.is_some_and(|max| {
        let gap = cols.get(1).map_or(0, |c| c.gap);
        lines
            .iter()
            .any(|(_, rest)| widths[0] + gap + rest.chars().count() > max)
    });
    for (n, (first, rest)) in lines.iter().enumerate() {
        if folds {
            if n == 0 {
                let _ = writeln!(out, "{first}");
            } else {
                wrap_into(out, first, "");
            }
            let _ = writeln!(out, "  {rest}");
        } else {
            let mut line = String::new();
            pad(&mut line, first, widths[0], cols[0].text_align);
            if cols.len() > 1 {
                line.push_str(&" ".repeat(cols[1].gap));
            }
            line.push_str(rest);
            let _ = writeln!(out, "{line}");
        }
    }
}

fn pad(out: &mut String, cell: &str, width: usize, align: Align) {
    let _ = match align {
        Align::Left => write!(out, "{cell:<width$}"),
        Align::Right => write!(out, "{cell:>width$}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduce_wraps_between_words_only() {
        let long = format!("results/{}", "x".repeat(80));
        let argv: Vec<String> = [
            "pmustress",
            "run",
            "--event",
            "task-clock",
            "--duration",
            "10s",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([String::from("--out"), long.clone(), String::from("--raw")])
        .collect();
        let mut text = String::new();
        reproduce_lines(&mut text, &argv);
        assert_eq!(
            text,
            format!(
                "reproduce: pmustress run --event task-clock --duration 10s --out \\\n    {long} \\\n    --raw\n"
            )
        );
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;
    use crate::report::format::markup::Column;

    fn table(key: &str) -> Table {
        let mut t = Table::new(vec![
            Column::left("host", Width::Widest),
            Column::right("runs", Width::Fixed(4)),
            Column::right("fit", Width::Fixed(3))
                .text_title("ok")
                .gap(2),
            Column::left("verdict", Width::Cell),
        ]);
        t.fold_wider_than = Some(WIDTH);
        t.row(vec![key.into(), "3".into(), "1".into(), "clean".into()]);
        t
    }

    #[test]
    fn columns_pad_align_and_take_their_gaps() {
        let mut m = Text::default();
        m.table(&table("a-host"));
        assert_eq!(
            m.text(),
            "host   runs   ok verdict\na-host    3    1 clean\n"
        );
    }

    /// A key too long for one row goes on a line of its own, the numbers
    /// indented under it, the header too.
    #[test]
    fn a_row_wider_than_the_fold_puts_its_first_cell_above() {
        let key = "k".repeat(60);
        let mut m = Text::default();
        m.table(&table(&key));
        assert_eq!(
            m.text(),
            format!("host\n  runs   ok verdict\n{key}\n     3    1 clean\n")
        );
    }
}
