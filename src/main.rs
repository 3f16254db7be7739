/*!
pmustress: a PMU-interrupt reliability stress tester.

This file only wires the command line: clap parses it (--help and --version
print and exit 0, a usage mistake is one line and 2), and
`cli::commands::dispatch` runs the subcommand on the kernel picked here:
the machine's (`Real`), or in a test build the one a test asks for
(`testkit::TestKernel`). Everything else is in the library (src/lib.rs
shows its layers).
*/

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser;

use pmustress::cli::Cli;
use pmustress::cli::Command;
use pmustress::cli::commands::{dispatch, emit};
use pmustress::domain::{EXIT_CANNOT_TEST, EXIT_USAGE};
use pmustress::engine::kernel::{Kernel, Real, process};

// A failed allocation is one line and 125 (run.json says why), never an
// abort with a backtrace (`process`).
#[global_allocator]
static ALLOCATOR: process::Allocator = process::Allocator;

/// The stack the command runs on: the main thread's when `ulimit -s`
/// allows this much, else a thread's of this size (a thread's stack does
/// not depend on the limit), so a tiny limit cannot overflow it.
const STACK_BYTES: usize = 8 << 20;

fn main() -> ExitCode {
    // std reports a new thread's signal stack that cannot be allocated as
    // a panic in that thread: it is running out of memory all the same.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed to allocate an alternative stack") {
            process::out_of_memory_because(&[
                b"a new thread's signal stack could not be allocated",
            ]);
        }
        default_hook(info);
    }));
    if process::stack_limit().is_some_and(|l| l < STACK_BYTES as u64) {
        let spawned = std::thread::Builder::new()
            .name("pmustress".into())
            .stack_size(STACK_BYTES)
            .spawn(command);
        return match spawned.map(|t| t.join()) {
            Ok(Ok(status)) => status,
            // The panic has printed its message.
            Ok(Err(_)) => ExitCode::from(101),
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "pmustress: cannot test here: cannot start a thread with a {} MiB stack (the stack limit, ulimit -s, is below it): {e}",
                    STACK_BYTES >> 20
                );
                ExitCode::from(EXIT_CANNOT_TEST as u8)
            }
        };
    }
    command()
}

fn command() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let text = e.render().to_string();
            return ExitCode::from(emit(&text, 0) as u8);
        }
        Err(e) => {
            let argv: Vec<_> = std::env::args_os().collect();
            let line = pmustress::cli::invalid_utf8_line(&e, &argv)
                .unwrap_or_else(|| pmustress::cli::usage_line(&e, &argv));
            let _ = writeln!(std::io::stderr(), "{line}");
            return ExitCode::from(EXIT_USAGE as u8);
        }
    };
    let status = dispatch_on_its_kernel(cli.command);
    ExitCode::from(status as u8)
}

/// `command` on the kernel the binary runs on: the one place it is picked.
fn dispatch_on_its_kernel(command: Command) -> i32 {
    #[cfg(feature = "testkit")]
    {
        use pmustress::testkit::TestKernel;
        match TestKernel::from_env() {
            Some(TestKernel::Scripted(fake)) => return on_its_pmu(command, &fake),
            Some(TestKernel::StalledWorker(stalled)) => return on_its_pmu(command, &stalled),
            None => {}
        }
    }
    on_its_pmu(command, &Real)
}

/// `command` on `machine` with the PMU its probes use (`check`'s battery,
/// and `run`'s interrupt skid): the machine's, or in a test build the fake
/// one a test asks for.
fn on_its_pmu<K: Kernel>(command: Command, machine: &K) -> i32 {
    #[cfg(feature = "testkit")]
    if let Some(pmu) = pmustress::testkit::fake_pmu::FakePmu::from_env() {
        return dispatch(command, machine, &pmu);
    }
    dispatch(command, machine, &Real)
}
