mod cpu;
fn main() {}
