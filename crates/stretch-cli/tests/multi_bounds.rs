//! Options of the multi-DNN commands that would run without bound or
//! simulate nothing are refused at once: one `error:` line naming the
//! option and the value at fault, a non-zero exit, no panic.

mod common;

use common::{repo, scratch};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `stretch args`, killing it after `secs`; the test fails unless it
/// exited non-zero within that time with one `error:` line holding every
/// string of `want`.
fn refused(args: &[&str], want: &[&str], secs: u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stretch"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run stretch");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{args:?} succeeded: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(last.starts_with("error: "), "{args:?}: {err}");
    for w in want {
        assert!(last.contains(w), "{args:?}: no '{w}' in: {err}");
    }
}

fn path(rel: &str) -> String {
    repo().join(rel).to_str().unwrap().to_string()
}

#[test]
fn an_overridden_duration_is_held_to_the_request_limit() {
    let w = path("configs/workloads/four_apps.toml");
    let device = path("configs/devices/snapdragon855.toml");
    let args = ["simulate", "--workload", &w, "--device", &device, "--compare", "fixed"];
    let mut long = args.to_vec();
    long.extend(["--duration-s", "1e7"]);
    refused(&long, &["--duration-s 10000000", "5000000"], 60);
    let pf = path("configs/workloads/person_finder.toml");
    refused(
        &[
            "simulate",
            "--thermal",
            "--workload",
            &pf,
            "--device",
            &device,
            "--duration-s",
            "1e7",
        ],
        &["--duration-s 10000000", "5000000"],
        60,
    );
}

#[test]
fn thermal_options_out_of_range_are_refused() {
    let pf = path("configs/workloads/person_finder.toml");
    let device = path("configs/devices/snapdragon855.toml");
    let base = [
        "simulate",
        "--thermal",
        "--workload",
        &pf,
        "--device",
        &device,
        "--duration-s",
        "1",
    ];
    let cases: [([&str; 2], &[&str]); 3] = [
        (["--eta", "2"], &["--eta 2", "0 to 1"]),
        (["--eta", "-1"], &["--eta -1", "0 to 1"]),
        (["--fps-sweep", "30,1e12"], &["--fps-sweep", "1e12", "10000"]),
    ];
    for (extra, want) in cases {
        let mut args = base.to_vec();
        args.extend(extra);
        refused(&args, want, 60);
    }
}

#[test]
fn a_thermal_run_refuses_model_groups_and_plans() {
    let dir = scratch("bounds-thermal-groups");
    let w = dir.join("groups.toml");
    std::fs::write(
        &w,
        format!(
            "duration_s = 1\n[[group]]\nname = \"g\"\nperiod_ms = 100\n[[app]]\nname = \"a\"\nmodel = \"{}\"\narrival = \"group\"\ngroup = \"g\"\n",
            repo().join("fixtures/models/resnet18.onnx").display()
        ),
    )
    .unwrap();
    let device = path("configs/devices/snapdragon855.toml");
    let w = w.to_str().unwrap();
    refused(
        &["simulate", "--thermal", "--workload", w, "--device", &device],
        &["--thermal", "app[0]", "group"],
        60,
    );
    let plan = dir.join("plan.json");
    std::fs::write(&plan, "{}").unwrap();
    let pf = path("configs/workloads/person_finder.toml");
    refused(
        &[
            "simulate",
            "--thermal",
            "--workload",
            &pf,
            "--device",
            &device,
            "--plan",
            plan.to_str().unwrap(),
            "--duration-s",
            "1",
        ],
        &["--thermal", "--plan"],
        60,
    );
}

#[test]
fn analyze_refuses_a_multiplier_beyond_its_limit() {
    let dir = scratch("bounds-analyze");
    let w = dir.join("w.toml");
    let model = repo().join("fixtures/models/resnet18.onnx");
    std::fs::write(
        &w,
        format!(
            "duration_s = 1\n[[group]]\nname = \"g\"\nperiod_multiplier = 1.0\n[[app]]\nname = \"a\"\nmodel = \"{0}\"\narrival = \"group\"\ngroup = \"g\"\n[[app]]\nname = \"b\"\nmodel = \"{0}\"\narrival = \"group\"\ngroup = \"g\"\n",
            model.display()
        ),
    )
    .unwrap();
    let device = path("configs/devices/s23ultra.toml");
    for m in ["1e9", "1e7", "inf"] {
        refused(
            &[
                "analyze",
                "--workload",
                w.to_str().unwrap(),
                "--device",
                &device,
                "--max-multiplier",
                m,
            ],
            &["--max-multiplier", "at most"],
            60,
        );
    }
}

#[test]
fn serve_refuses_zero_rounds() {
    let w = path("configs/workloads/four_apps.toml");
    refused(
        &["serve", "--workload", &w, "--rounds", "0", "--duration-s", "0.5"],
        &["--rounds 0", "at least 1"],
        60,
    );
}
