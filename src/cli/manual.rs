/*!
Shell completions and the man page, generated from the clap definitions in
`cli` at run time (`pmustress completions SHELL`, `pmustress man`).

At run time rather than from build.rs (hyperfine's way): files a build
script writes stay in cargo's OUT_DIR, which `cargo install` throws away,
so its users would get neither. A packager can still run both commands
after building.
*/

use std::io::{self, Write};

use clap::CommandFactory;
use clap_complete::Shell;
use clap_mangen::Man;

use crate::cli::Cli;

/// Writes the completion script for `shell`.
pub fn completions(shell: Shell, out: &mut dyn Write) {
    clap_complete::generate(shell, &mut Cli::command(), "pmustress", out);
}

/// roff's preamble, which every rendered piece repeats.
const PREAMBLE: [&str; 2] = [".ie \\n(.g .ds Aq \\(aq", ".el .ds Aq '"];

/// One rendered piece without roff's preamble and, when `drop_heading`, without
/// its `.SH` heading, so it can go under a heading of ours.
fn piece(
    render: impl Fn(&mut Vec<u8>) -> io::Result<()>,
    drop_heading: bool,
) -> io::Result<String> {
    let mut buf = Vec::new();
    render(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let mut out = String::new();
    let mut heading_dropped = !drop_heading;
    for line in text.lines() {
        if PREAMBLE.contains(&line) {
            continue;
        }
        if !heading_dropped && line.starts_with(".SH ") {
            heading_dropped = true;
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

/// Writes one man page (roff) for pmustress and every command: the top
/// page, then a section per command with its synopsis, description and
/// options, then the exit statuses.
pub fn man_page(out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = Cli::command();
    cmd.build();
    // The footer centres the source between the date and the page name:
    // the version's 40-digit commit ran into "pmustress(1)" there. The
    // commit stays in the VERSION section.
    let top = Man::new(cmd.clone()).source(format!("pmustress {}", env!("CARGO_PKG_VERSION")));
    let mut page = String::new();
    for line in PREAMBLE {
        page.push_str(line);
        page.push('\n');
    }
    page += &piece(|b| top.render_title(b), false)?;
    page += &piece(|b| top.render_name_section(b), false)?;
    page += &piece(|b| top.render_synopsis_section(b), false)?;
    page += &piece(|b| top.render_description_section(b), false)?;
    page += ".PP\nEach command has a section below; \\fBpmustress COMMAND \\-\\-help\\fR says the same.\n";
    page += &piece(|b| top.render_options_section(b), false)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        let man = Man::new(sub.clone());
        page += &format!(".SH \"PMUSTRESS {}\"\n", sub.get_name().to_uppercase());
        page += &piece(|b| man.render_synopsis_section(b), true)?;
        page += ".PP\n";
        page += &piece(|b| man.render_description_section(b), true)?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            page += ".SS Options\n";
            page += &piece(|b| man.render_options_section(b), true)?;
        }
    }
    page += ".SH \"EXIT STATUS\"\n\
         Chosen for \\fBgit bisect run\\fR; run.json's exit_status is always \
         the status the run exited with:\n\
         .TP\n0\nno dropped interrupt in at least 299 overflows (other \
         commands: success)\n\
         .TP\n1\ndropped interrupts found\n\
         .TP\n2\nusage error: a flag, a value or a path is wrong, or a \
         results directory is not one pmustress wrote; checked before \
         anything is opened\n\
         .TP\n125\ncannot test here (no PMU, unsupported event, permission, \
         out of file descriptors, a full disk), a run too short to say \
         anything (not enough overflows), a run that could not be judged \
         or saved, output that could not be written; report: a run shown \
         did not finish\n\
         .TP\n128+N\ninterrupted by signal N (129 SIGHUP, 130 SIGINT, 131 \
         SIGQUIT, 135 SIGBUS or 139 SIGSEGV sent by a process, 138 SIGUSR1, \
         140 SIGUSR2, 141 SIGPIPE, 142 SIGALRM, 143 SIGTERM, 152 SIGXCPU, \
         154 SIGVTALRM, 155 SIGPROF): judged on what was measured and \
         saved\n";
    page += &piece(|b| top.render_version_section(b), false)?;
    out.write_all(page.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_page_covers_every_command() {
        let mut buf = Vec::new();
        man_page(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text.lines().nth(2).map(|l| &l[..4]), Some(".TH "));
        for heading in [
            "PMUSTRESS RUN",
            "PMUSTRESS PLOT",
            "PMUSTRESS MAN",
            "EXIT STATUS",
        ] {
            assert!(text.contains(heading), "{heading}");
        }
        assert_eq!(text.matches(".TH ").count(), 1);
        let th = text.lines().find(|l| l.starts_with(".TH ")).unwrap();
        assert_eq!(
            th,
            format!(
                ".TH pmustress 1  \"pmustress {}\" ",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert!(text.contains("\n.SH VERSION\n"), "the commit is said there");
        // Each command's own SYNOPSIS/DESCRIPTION/OPTIONS headings are gone.
        assert_eq!(text.matches(".SH SYNOPSIS").count(), 1);
        assert_eq!(text.matches(".SH OPTIONS").count(), 1);
        assert_eq!(text.matches(".ds Aq").count(), 2, "one preamble");
    }
}
