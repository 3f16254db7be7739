//! Integration tests: the real binary, real perf events (software clocks,
//! since CI has no PMU), real signals and migrations.

mod util;

mod architecture;
mod bad_input;
mod bisect;
mod check;
mod cli_properties;
mod completions;
mod contract;
mod env;
mod histogram_logs;
mod interrupt;
mod interrupt_skid;
mod matrix;
mod memory;
mod model;
mod oracle;
mod output_failures;
mod perf_spellings;
#[cfg(feature = "plot")]
mod plot;
#[cfg(not(feature = "plot"))]
mod plot_missing;
mod readable_output;
mod recorded_totals;
mod refusals;
mod reliability;
mod report;
mod run_software;
mod status_under_duress;
mod stop_signals;
mod testkit;
