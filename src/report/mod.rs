/*!
Reports: everything that reads results directories back and renders them.

`runs` is `pmustress report`, `checks` its reading of `pmustress check`
directories (alone or grouped), `groups` its `--group-by` (a fleet's runs
pooled by host, instance type, kernel or pseudo-NMI), `compare` is
`pmustress compare` and `mail` its `--mail` (an A/B's whole mail body);
`plot` is `pmustress plot` (only with the cargo feature `plot`, on by
default); `replay` judges a saved stream again; `accounting` is the lines
both the end of a run and a replay print.
*/

pub mod accounting;
pub mod checks;
pub mod compare;
pub mod groups;
pub mod mail;
#[cfg(feature = "plot")]
pub mod plot;
pub mod replay;
pub mod runs;
