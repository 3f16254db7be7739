/*!
Evidence: what a run leaves behind, and everything that reads it back.

`results` is the run.json schema; `totals` builds it from what the engine
recorded; `verdict` is the verdict rule, the one pure function every
command takes its verdict and its words from; `results_dir` writes
a run's directory (run.json, raw.csv.gz, anomalies.csv, histogram logs) as
the run goes; `runfile` reads run.json back, refusing anything pmustress
does not write, and `loaded_run` the whole directory; `report` is
`pmustress report`, `groups` its `--group-by` (a fleet's runs pooled by
host, instance type, kernel or pseudo-NMI), `compare` is `pmustress
compare` and `mail` its `--mail` (an A/B's whole mail body); `plot` is
`pmustress plot` (only with the cargo feature `plot`, on by default);
`replay` judges a saved stream again; `accounting` is the lines both the
end of a run and a replay print.
*/

pub mod accounting;
pub mod compare;
pub mod groups;
pub mod loaded_run;
pub mod mail;
#[cfg(feature = "plot")]
pub mod plot;
pub mod replay;
pub mod report;
pub mod results;
pub mod results_dir;
pub mod runfile;
pub mod totals;
pub mod verdict;
