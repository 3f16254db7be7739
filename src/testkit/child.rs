/*!
Unit tests that end their process (a fault, an exit the code under test
makes) run in a child: this test binary again, running one ignored test,
with an environment variable that tells that test it is the child.
*/

/// Runs the ignored unit test `test` (its full path) in a child process
/// with `var` set, and returns what the child did.
pub fn run_in_child(test: &str, var: &str) -> std::process::Output {
    std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(var, "1")
        .output()
        .expect("the test binary runs again")
}

/// Whether this process is the child `run_in_child` started with `var`:
/// the child test does its work only then.
pub fn is_child(var: &str) -> bool {
    std::env::var_os(var).is_some()
}
