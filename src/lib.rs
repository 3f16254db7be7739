/*!
pmustress's engine as a library, so the binary, the benches and the fuzz
targets share one implementation. The folders are the layers, and data flows
one way: `cli` validates the command line into a `config::RunConfig` (what
to run, and the event resolved for this machine); `engine` runs it (workers,
migrator, signals, the kernel's sample rings) into one observation stream
per worker; `judge` decides every overflow and every delivery from that
stream; `verdict` is the verdict rule over a run's counts; `check` is
the fitness battery (probes of the PMU with known answers, and what they
make of rr and of sampling profilers); `results`
writes the results directory and reads it back; `report` renders what
was read (report, compare, plot, replay), each report once, through the
blocks every output format implements (`report::format`, a file a format); `fingerprint` describes the
machine. Below them all: `records` is the observation stream's rows and
their text format (raw.csv.gz), `stats` turns counts into rates with exact
intervals, and `domain` holds the words they all share.

Each module imports only the ones below it (tests/architecture.rs checks
this, and that this graph is the code's):

```text
testkit -> domain, engine, judge, records
cli -> check, config, domain, engine, fingerprint, judge, records, report, results, stats, verdict
report -> check, domain, engine, fingerprint, judge, records, results, stats, verdict
results -> config, domain, engine, fingerprint, judge, records, stats, verdict
check -> domain, engine, fingerprint
verdict -> config, domain, judge, stats
engine -> config, domain, fingerprint, judge, records
config -> domain, fingerprint, judge, stats
judge -> domain, records, stats
fingerprint -> nothing
records -> nothing
stats -> nothing
domain -> nothing
```

Only `engine::kernel` (the probes' loop and ioctls in `engine::kernel::probe` too) and `engine::signal` (and the fingerprint's one syslog
call) contain `unsafe` code of their own: they are the modules that talk to
the kernel. The test kit's fake kernel calls the signal handler's recording
functions as the kernel would, which is `unsafe` too; it is never shipped. `engine::run`'s watchdog makes the one `unsafe` call outside
them (`Kernel::disable_by_number`, a DISABLE by fd number).
*/

// No function over 120 lines (clippy.toml's threshold, with no module
// exempt), and no `pub` item the crate's API cannot reach.
#![warn(clippy::too_many_lines, unreachable_pub)]

/// One line to stderr, a failure to write it ignored: `eprintln!` panics
/// when stderr cannot be written (`2>/dev/full`), which turned a refusal
/// into exit 101; the status must stay the one the line explains.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod check;
pub mod cli;
pub mod config;
pub mod domain;
pub mod engine;
pub mod fingerprint;
pub mod judge;
pub mod records;
pub mod report;
pub mod results;
pub mod stats;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod verdict;
