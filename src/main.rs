/*!
pmustress: a PMU-interrupt reliability stress tester.

This file only wires the command line: clap parses it (--help and --version
print and exit 0, a usage mistake is one line and 2), and
`cli::commands::dispatch` runs the subcommand. Everything else is in the
library (src/lib.rs shows its layers).
*/

use std::process::ExitCode;

use clap::Parser;

use pmustress::cli::Cli;
use pmustress::cli::commands::{dispatch, emit};
use pmustress::domain::EXIT_USAGE;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let text = e.render().to_string();
            return ExitCode::from(emit(&text, 0) as u8);
        }
        Err(e) => {
            eprintln!("{}", pmustress::cli::usage_line(&e));
            return ExitCode::from(EXIT_USAGE as u8);
        }
    };
    let status = dispatch(cli.command);
    ExitCode::from(status as u8)
}
