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
pub mod domain;
pub mod engine;
pub mod evidence;
pub mod fingerprint;
pub mod judge;
