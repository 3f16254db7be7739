//! What every format does to text read from files before showing it.

use std::fmt::Write as _;

/// `text` with every control character but newline and tab written as
/// \u00XX, so nothing read from a run.json, anomalies.csv or a --root
/// tree can move the cursor, retitle the terminal or overwrite a line
/// (a carriage return) where it is printed. JSON stays valid: serde_json
/// escapes the ones below 0x20 itself, and \u007f is a JSON escape.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.contains(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if bad(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `text` on one line: a newline in it (in a directory's name or a
/// recorded hostname) written as `\n`. A raw one started a line of its
/// own that read as another row, or another run. The other control
/// characters are `escape_controls`'s, on the whole output.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\n') {
        text.replace('\n', "\\n").into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("a\tb\nc"), "a\tb\nc");
        assert_eq!(
            escape_controls("\u{1b}]0;x\u{7}\r\u{7f}\u{9b}"),
            "\\u001b]0;x\\u0007\\u000d\\u007f\\u009b"
        );
    }
}
