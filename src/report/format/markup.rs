//! What a report says, apart from how a format shows it: the blocks
//! every report is written in (`Markup`), the tables among them, and the
//! one thing a report does (`Report::write`).

use crate::report::answers::Answer;

/// The blocks of a report. Each format is one implementation; a report
/// never asks which one it writes to.
pub trait Markup {
    /// A section of its own (a check): "## ..." in markdown.
    fn title(&mut self, text: &str);
    /// A run's heading: "### ..." in markdown, "== ..." in text.
    fn heading(&mut self, text: &str);
    /// One fact a line: a list item in markdown, where the lines of one
    /// paragraph would run together when rendered.
    fn fact(&mut self, text: &str);
    /// A fact under the fact before it (a verdict's evidence).
    fn detail(&mut self, text: &str);
    /// One of a list (an anomaly, a side's machines): indented in text.
    fn item(&mut self, text: &str);
    /// What the reader must weigh before the numbers below it.
    fn warning(&mut self, text: &str);
    /// A note below a table.
    fn note(&mut self, text: &str);
    /// A line as it is, in every format.
    fn line(&mut self, text: &str);
    /// An empty line in every format.
    fn blank(&mut self);
    /// The end of a paragraph: an empty line where the format needs one
    /// to end a list or a table (markdown), nothing in text.
    fn paragraph_end(&mut self);
    /// A line of fixed columns (a finding): kept whole, never reflowed.
    fn listing(&mut self, line: &str);
    /// The command that reproduces a run: its words, and the same as one
    /// shell line.
    fn command(&mut self, words: &[String], line: &str);
    /// A drawing in characters (the histogram), under its caption.
    fn chart(&mut self, caption: &str, lines: &[String]);
    fn table(&mut self, table: &Table);
    /// A run's answers: how often overflows are lost, and whether any
    /// interrupt came that should not have.
    fn answers(&mut self, rows: &[Answer]);
    /// Everything written so far.
    fn text(&self) -> &str;
}

/// A report: one value that writes itself in whatever format it is given.
pub trait Report {
    fn write(&self, m: &mut dyn Markup);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// How wide a column is in text (markdown does not pad).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// As wide as its cell: no padding (a last column).
    Cell,
    Fixed(usize),
    /// As wide as the widest of its cells and title.
    Widest,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub title: String,
    /// The title in text where a narrow one fits better ("rr-fit").
    pub text_title: Option<String>,
    pub width: Width,
    pub text_align: Align,
    pub markdown_align: Align,
    /// Spaces before it in text.
    pub gap: usize,
}

impl Column {
    fn new(title: &str, width: Width, align: Align) -> Column {
        Column {
            title: title.to_string(),
            text_title: None,
            width,
            text_align: align,
            markdown_align: align,
            gap: 1,
        }
    }

    /// A name or a key, left-aligned.
    pub fn left(title: &str, width: Width) -> Column {
        Column::new(title, width, Align::Left)
    }

    /// A number, right-aligned.
    pub fn right(title: &str, width: Width) -> Column {
        Column::new(title, width, Align::Right)
    }

    pub fn text_title(mut self, title: &str) -> Column {
        self.text_title = Some(title.to_string());
        self
    }

    pub fn gap(mut self, spaces: usize) -> Column {
        self.gap = spaces;
        self
    }

    /// Right-aligned in markdown, however text aligns it (a rate with its
    /// interval reads better left-aligned in fixed columns).
    pub fn markdown_right(mut self) -> Column {
        self.markdown_align = Align::Right;
        self
    }
}

/// Rows under titled columns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<String>>,
    /// In text, a table wider than this many columns puts each row's
    /// first cell on a line of its own, the rest indented below it.
    pub fold_wider_than: Option<usize>,
}

impl Table {
    pub fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            ..Table::default()
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}
