/*!
The test kit: what tests, benches and fuzz targets need to drive the
product, and never part of it. It is compiled only with the `testkit`
feature, which the tests and benches turn on (Cargo.toml) and `cargo
build` never does, and nothing shipped imports it: it imports the engine
and the judge (tests/architecture.rs checks both).

`fake_kernel` is the scripted kernel the run loop runs on without a PMU;
`stalled_worker` is the machine's kernel with one worker stalled;
`fake_pmu` is a PMU for the fitness probes, healthy or faulty as asked;
`ring_encoder` writes observations as the kernel's ring records;
`driver_model` generates observation streams with their ground truth, for
the judge's property tests; `child` runs a unit test that ends its
process in a child process.
`TestKernel` is the kernel a test asks the whole binary to run on, through
the environment; `main.rs` is the one place that picks it over `Real`.
*/

pub mod child;
pub mod driver_model;
pub mod fake_kernel;
pub mod fake_pmu;
pub mod ring_encoder;
pub mod stalled_worker;

use fake_kernel::{FakeKernel, Scripted};
use stalled_worker::StalledWorker;

/// The kernel a test asks the binary to run on, through the environment.
pub enum TestKernel {
    /// `SCRIPT_ENV` names a `Scripted`: the run plays it on the fake kernel,
    /// on the fixture machine it names.
    Scripted(FakeKernel),
    /// `STALL_ENV` names a worker: the machine's kernel, that worker stalled.
    StalledWorker(StalledWorker),
}

impl TestKernel {
    /// The kernel the environment asks for, if it asks for one.
    pub fn from_env() -> Option<TestKernel> {
        if let Some(scripted) = Scripted::from_env() {
            return Some(TestKernel::Scripted(scripted.kernel()));
        }
        StalledWorker::from_env().map(TestKernel::StalledWorker)
    }
}
