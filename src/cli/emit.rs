//! Writing a command's output: all of it, or one line saying why not.

use crate::domain::EXIT_CANNOT_TEST;
use crate::report::format::escape::escape_controls;

/// Writes a command's whole output and returns `status`: a failed write (a
/// full disk, /dev/full) is one line and 125, never a lost output with 0.
/// A reader that went away (`| head`) took what it wanted: not an error.
pub fn emit(text: &str, status: i32) -> i32 {
    emit_bytes(escape_controls(text).as_bytes(), status)
}

pub fn emit_bytes(bytes: &[u8], status: i32) -> i32 {
    use std::io::Write as _;
    if crate::engine::kernel::process::stdout_was_closed() {
        errln!("pmustress: cannot write the output: stdout is closed");
        return EXIT_CANNOT_TEST;
    }
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            errln!("pmustress: cannot write the output: {e}");
            EXIT_CANNOT_TEST
        }
        _ => status,
    }
}
