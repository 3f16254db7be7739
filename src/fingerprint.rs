/*!
The machine fingerprint: what a result was measured on.

A count of dropped PMU interrupts is evidence only together with the kernel,
CPU, hypervisor, PMU and settings it came from; above all, whether the PMU
overflow interrupt was an NMI (arm64 pseudo-NMI), which decides whether the
bug can happen at all. `pmustress env` prints this; `pmustress run` prints the
verdict line before measuring and embeds the whole fingerprint in its
results.

Every value carries its source, and a missing source is said ("not present:
/proc/config.gz"), never filled in by a guess. Everything is read under a root
directory (`/` live), so the same code runs on fixture trees in
`tests/fixtures/fingerprint`. Collecting never fails.
*/

mod kernel;
mod kmsg;
mod pseudo_nmi;
mod read;
