//! Integration tests: the real binary, real perf events (software clocks,
//! since CI has no PMU), real signals and migrations.

mod util;

mod bad_input;
mod env;
mod matrix;
mod run_software;
