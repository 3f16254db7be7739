/*!
The engine: everything that runs a measurement and talks to the kernel.

It is given a `config::RunConfig` (built and checked by `cli::validate`).

`run` is the run loop: it starts one `worker` per CPU and the `migrator`,
drains the `signal` rings and the kernel's sample rings (`sample_ring`) into one
observation stream per worker, and hands it to the judge. `kernel` is the
seam every syscall goes through (`kernel::Real`, and the test kit's
`testkit::fake_kernel` for tests); `ring` is the lock-free ring the signal handler writes; `stop_signal` holds
the handlers of the signals that stop a run; `limits`
checks the signal queue, descriptors and memory a run needs before it starts.
*/

pub mod kernel;
pub mod limits;
pub mod migrator;
pub mod ring;
pub mod run;
pub mod sample_ring;
pub mod signal;
pub mod stop_signal;
pub mod worker;
