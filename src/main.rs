// Not wired to a command yet: `pmustress env` and `run` will use these.
#[allow(dead_code)]
mod cpu;
#[allow(dead_code)]
mod fingerprint;
fn main() {}
