/*!
pmustress's engine as a library, so the binary, the benches and the fuzz
targets share one implementation. Data flows one way:

config -> run (worker, migrator, signal, kernel, sample) -> the observation
stream -> judge (interrupts, deliveries) -> results -> report; fingerprint
and cpu describe the machine.

Only `kernel` and `signal` (and the fingerprint's one syslog call) contain
`unsafe`: they are the modules that talk to the kernel.
*/

pub mod cli;
pub mod config;
pub mod cpu;
pub mod domain;
pub mod event;
pub mod evidence;
pub mod export;
pub mod fingerprint;
pub mod judge;
pub mod kernel;
pub mod manual;
pub mod migrator;
pub mod plot;
pub mod replay;
pub mod report;
pub mod results;
pub mod ring;
pub mod run;
pub mod runfile;
pub mod sample;
pub mod signal;
pub mod sigqueue;
pub mod stats;
pub mod worker;
