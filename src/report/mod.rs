/*!
Reports: everything that reads results directories back and renders them.

`runs` is `pmustress report`, `checks` its reading of `pmustress check`
directories (alone or grouped), `groups` its `--group-by` (a fleet's runs
pooled by host, instance type, kernel or pseudo-NMI), `compare` is
`pmustress compare` and `mail` its `--mail` (an A/B's whole mail body);
`plot` is `pmustress plot` (only with the cargo feature `plot`, on by
default); `replay` judges a saved stream again; `check_run` is the lines
`pmustress check` ends with; `accounting` is the lines both the end of a
run and a replay print; `answers` the rates every report gives.

Each report is one value that writes itself in `format::markup`'s blocks
(facts, headings, tables, the histogram...); `format` has one file per
output format (text, markdown, and JSON, which serialises the value
instead) and `format::render` is the one place a format is picked.
*/

pub mod accounting;
pub mod answers;
pub mod check_run;
pub mod checks;
pub mod compare;
pub mod format;
pub mod groups;
pub mod mail;
#[cfg(feature = "plot")]
pub mod plot;
pub mod replay;
pub mod runs;
