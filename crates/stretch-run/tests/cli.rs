//! The runner's own command line (bundles themselves are exercised by
//! `crates/stretch-cli/tests/bundle.rs` and `fixtures_runtime.rs`, which
//! make them with `stretch export`).

use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_stretch-run"))
        .args(args)
        .output()
        .expect("run stretch-run")
}

#[test]
fn help_names_the_manifest_and_a_missing_bundle_is_one_line() {
    let help = run(&["--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("bundle.json"));
    let dir = std::env::temp_dir().join(format!("stretch-run-missing-{}", std::process::id()));
    let out = run(&[dir.to_str().unwrap(), "--check"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot find bundle.json in"), "{err}");
}
