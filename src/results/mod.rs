/*!
The results directory: what a run leaves behind.

`schema` is run.json's schema and anomalies.csv's columns; `from_record`
builds it from what the engine recorded; `writer` writes a run's directory
(run.json, raw.csv.gz, anomalies.csv, histogram logs) as the run goes;
`reader` reads run.json back, refusing anything pmustress does not write,
and `loaded` the whole directory.
*/

pub mod from_record;
pub mod loaded;
pub mod reader;
pub mod schema;
pub mod writer;
