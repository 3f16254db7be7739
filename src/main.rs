// Not wired to a command yet: `pmustress env` and `run` will use it.
#[allow(dead_code)]
mod cpu;
fn main() {}
