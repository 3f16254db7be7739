//! `pmustress completions SHELL` and `pmustress man`: generated from the
//! clap definitions, so a new flag shows up without anyone editing them.

use crate::util::{run, stdout_of as stdout};

#[test]
fn bash_completion_knows_commands_and_flags() {
    let text = stdout(&["completions", "bash"]);
    for word in [
        "pmustress",
        "--inject-drop-every",
        "plot",
        "--output",
        "completions",
    ]
    .into_iter()
    // plot's flags exist only with the `plot` feature; the command is always listed.
    .filter(|w| cfg!(feature = "plot") || *w != "--output")
    {
        assert!(text.contains(word), "{word} missing");
    }
}

#[test]
fn every_shell_gets_a_script() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let text = stdout(&["completions", shell]);
        // fish writes `-l inject-drop-every`, the others the whole flag.
        assert!(text.contains("inject-drop-every"), "{shell}");
    }
    assert_eq!(run(&["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn man_page_is_roff_with_every_flag() {
    let text = stdout(&["man"]);
    assert!(text.contains("\n.TH pmustress 1 "), "{}", &text[..120]);
    // roff writes a hyphen in a flag as \-.
    let plain = text.replace("\\-", "-");
    for word in [
        "--period",
        "--inject-drop-every",
        "--output",
        "PMUSTRESS PLOT",
        "EXIT STATUS",
    ]
    .into_iter()
    .filter(|w| cfg!(feature = "plot") || *w != "--output")
    {
        assert!(plain.contains(word), "{word} missing");
    }
}
