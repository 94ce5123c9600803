//! `stretch sweep` on the bundled digits with the local pool: its table
//! equals `compare-accuracy`'s for the same models and seed, a sweep killed
//! midway finishes only its missing jobs when rerun, a failing job is
//! retried and reported while the others finish, and bad sweep files are
//! refused before anything runs.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn zoo(dir: &Path) -> String {
    let m = arg(&dir.join("resnet-mini.onnx"));
    stretch_ok(&[
        "zoo",
        "resnet-mini",
        "--input-size",
        "16",
        "--classes",
        "10",
        "--seed",
        "1",
        "-o",
        &m,
    ]);
    m
}

fn rows(report: &serde_json::Value) -> Vec<serde_json::Value> {
    report["rows"].as_array().expect("rows").clone()
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json written")).expect("valid json")
}

#[test]
fn a_sweep_equals_compare_accuracy_for_the_same_models_and_seed() {
    let dir = scratch("sweep-equal");
    let m = zoo(&dir);
    std::fs::write(dir.join("pair.toml"), INT8_PAIR).expect("device");
    std::fs::write(
        dir.join("s.toml"),
        "dataset = \"digits\"\noriginal = \"resnet-mini.onnx\"\nseeds = [4]\ndistill = true\n\
         precisions = [\"fp32\", \"profile\"]\ndevice = \"pair.toml\"\n\
         [[stretch]]\ndevice = \"pair.toml\"\nmerges = [\"project\"]\noptions = { alpha = 1 }\n\
         [recipe]\nepochs = 1\nlimit = 120\n\
         [qat]\nepochs = 1\noptions = { calibration_samples = 16 }\n",
    )
    .expect("sweep file");
    let json = dir.join("sweep.json");
    let text = stretch_ok(&[
        "sweep",
        &arg(&dir.join("s.toml")),
        "-o",
        &arg(&dir.join("out")),
        "--jobs",
        "2",
        "--json",
        &arg(&json),
    ]);
    assert!(
        text.contains("seed 4") && text.contains("branched1-project-qat"),
        "{text}"
    );
    let sweep = read_json(&json);
    assert_eq!(sweep["schema"], "stretch.sweep/1");
    let swept = rows(&sweep["seeds"][0]);

    let branched = dir.join("project.onnx");
    std::fs::copy(dir.join("out/seed4/branched1-project.branched.onnx"), &branched).expect("branched file");
    let cmp = dir.join("cmp.json");
    stretch_ok(&[
        "compare-accuracy",
        &m,
        &arg(&branched),
        "--dataset",
        "digits",
        "--seed",
        "4",
        "--epochs",
        "1",
        "--limit",
        "120",
        "--distill",
        "--precision",
        "profile",
        "--device",
        &arg(&dir.join("pair.toml")),
        "--qat-epochs",
        "1",
        "--calibration-samples",
        "16",
        "--out-dir",
        &arg(&dir.join("cmp")),
        "--json",
        &arg(&cmp),
    ]);
    let compared = rows(&read_json(&cmp));
    let labels = |rows: &[serde_json::Value]| -> Vec<String> {
        rows.iter()
            .map(|r| r["label"].as_str().expect("label").to_string())
            .collect()
    };
    assert_eq!(
        labels(&swept),
        [
            "original",
            "branched1-project",
            "branched1-project-ptq",
            "branched1-project-qat",
            "branched1-project-kd"
        ]
    );
    assert_eq!(labels(&swept), labels(&compared));
    for (s, c) in swept.iter().zip(&compared) {
        for key in [
            "distilled",
            "params",
            "macs",
            "top1",
            "top5",
            "best_top1",
            "gap_top1",
            "precision",
            "file_bytes",
            "gap_fp32_branched",
        ] {
            assert_eq!(
                s[key], c[key],
                "{key} of {}: sweep {s} vs compare-accuracy {c}",
                s["label"]
            );
        }
    }
    for label in ["original", "branched1-project", "branched1-project-kd"] {
        assert!(
            std::fs::read(dir.join(format!("out/seed4/{label}.onnx"))).expect("swept model")
                == std::fs::read(dir.join(format!("cmp/{label}.onnx"))).expect("compared model"),
            "{label}: the sweep's model differs from compare-accuracy's"
        );
    }
}

/// The phase of every job in a sweep directory's state file.
fn phases(dir: &Path) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(dir.join("state.json")) else {
        return Vec::new();
    };
    let Ok(state) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    state["jobs"]
        .as_object()
        .map(|jobs| {
            jobs.iter()
                .map(|(id, s)| (id.clone(), s["phase"].as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_killed_sweep_reruns_only_the_missing_jobs() {
    use std::os::unix::process::CommandExt;
    let dir = scratch("sweep-resume");
    zoo(&dir);
    std::fs::write(
        dir.join("s.toml"),
        "dataset = \"digits\"\noriginal = \"resnet-mini.onnx\"\nmodels = [\"resnet-mini.onnx\"]\n\
         seeds = [0, 1, 2]\n[recipe]\nepochs = 1\nlimit = 200\n",
    )
    .expect("sweep file");
    let out = dir.join("out");
    let args = ["sweep", &arg(&dir.join("s.toml")), "-o", &arg(&out)];
    let mut child = Command::new(env!("CARGO_BIN_EXE_stretch"))
        .args(args)
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the sweep");
    let start = Instant::now();
    let finished = loop {
        let done: Vec<String> = phases(&out)
            .into_iter()
            .filter(|(_, p)| p == "succeeded")
            .map(|(id, _)| id)
            .collect();
        if done.len() >= 2 {
            break done;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no two jobs finished in 300 s"
        );
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the sweep ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: kill(2) of the sweep's own process group.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    child.wait().expect("reap the sweep");
    let all = phases(&out);
    assert_eq!(all.len(), 6, "{all:?}");
    assert!(finished.len() < 6, "the sweep finished before it was killed: {all:?}");
    let stamp = |id: &str| {
        let label = id.split_once('-').expect("s{seed}-{label}").1;
        let seed = &id[1..id.find('-').expect("dash")];
        let path = out.join(format!("seed{seed}/{label}.onnx"));
        std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("finished model")
    };
    let before: Vec<_> = finished.iter().map(|id| stamp(id)).collect();
    let text = stretch_ok(&args);
    assert!(
        text.contains(&format!("{} of 6 jobs had finished in an earlier run", finished.len())),
        "{text}"
    );
    for (id, t) in finished.iter().zip(before) {
        assert_eq!(stamp(id), t, "{id} finished before the kill and was trained again");
    }
    assert!(phases(&out).iter().all(|(_, p)| p == "succeeded"), "{:?}", phases(&out));
    assert!(
        text.contains("seed 2") && text.contains("branched1-resnet-mini"),
        "{text}"
    );
}

#[test]
fn a_failing_job_is_retried_then_reported_while_the_others_finish() {
    let dir = scratch("sweep-fail");
    zoo(&dir);
    std::fs::write(dir.join("broken.onnx"), b"not a model").expect("broken model");
    std::fs::write(
        dir.join("s.toml"),
        "dataset = \"digits\"\noriginal = \"resnet-mini.onnx\"\nmodels = [\"broken.onnx\"]\n\
         [recipe]\nepochs = 1\nlimit = 100\n",
    )
    .expect("sweep file");
    let out = dir.join("out");
    let r = stretch(&["sweep", &arg(&dir.join("s.toml")), "-o", &arg(&out), "--retries", "2"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
    assert!(!r.status.success(), "{stdout}");
    assert!(stderr.contains("1 of 2 jobs failed"), "{stderr}");
    assert!(stdout.contains("failed: s0-branched1-broken"), "{stdout}");
    assert!(stdout.contains("broken.onnx"), "the log's tail is not shown: {stdout}");
    assert!(stdout.contains("original (") && stdout.contains('%'), "{stdout}");
    let log = std::fs::read_to_string(out.join("logs/s0-branched1-broken.log")).expect("log");
    assert_eq!(log.matches("--- attempt").count(), 3, "{log}");
    assert!(
        stderr.contains("attempt 1 of 3 failed") && stderr.contains("attempt 2 of 3 failed"),
        "{stderr}"
    );
}

#[test]
fn bad_sweep_files_are_refused_before_anything_runs() {
    let dir = scratch("sweep-bad");
    zoo(&dir);
    let base = "dataset = \"digits\"\noriginal = \"resnet-mini.onnx\"\nmodels = [\"resnet-mini.onnx\"]\n";
    let cases = [
        ("seeds = [0]\nepoch = 3\n", "unknown field `epoch`"),
        ("models = [\"nowhere.onnx\"]\n", "`models`: "),
        ("[recipe]\nepoch = 3\n", "unexpected argument '--epoch'"),
        ("[recipe]\nbackend = \"abacus\"\n", "job s0-original"),
        ("precisions = [\"fp32\", \"profile\"]\n", "set `device`"),
    ];
    for (extra, want) in cases {
        let text = if extra.starts_with("models") {
            base.replace("models = [\"resnet-mini.onnx\"]\n", extra)
        } else {
            format!("{base}{extra}")
        };
        std::fs::write(dir.join("s.toml"), &text).expect("sweep file");
        let out = dir.join("out");
        let r = stretch(&["sweep", &arg(&dir.join("s.toml")), "-o", &arg(&out)]);
        let e = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success(), "{extra:?} was accepted");
        assert!(e.contains(want) && e.contains("s.toml"), "{extra:?}: {e}");
        assert!(!out.join("state.json").exists(), "{extra:?}: jobs were started");
    }
    let missing = base.replace("\"digits\"", "\"mnist:/nonexistent\"");
    std::fs::write(dir.join("s.toml"), missing).expect("sweep file");
    let r = stretch(&["sweep", &arg(&dir.join("s.toml")), "--dry-run"]);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(
        !r.status.success() && e.contains("`dataset`: /nonexistent does not exist"),
        "a missing dataset passed --dry-run: {e}"
    );
    std::fs::write(dir.join("s.toml"), base).expect("sweep file");
    let start = Instant::now();
    let r = stretch(&[
        "sweep",
        &arg(&dir.join("s.toml")),
        "-o",
        &arg(&dir.join("out")),
        "--ray",
        "http://127.0.0.1:9",
    ]);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(
        !r.status.success() && e.contains("Ray cluster at http://127.0.0.1:9"),
        "{e}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "an unreachable cluster took {:?}",
        start.elapsed()
    );
    assert!(!dir.join("out/state.json").exists(), "jobs were started");
}

#[test]
fn a_sweep_directory_in_use_is_refused_naming_its_holder() {
    use std::os::fd::AsRawFd;
    let dir = scratch("sweep-locked");
    zoo(&dir);
    std::fs::write(
        dir.join("s.toml"),
        "dataset = \"digits\"\noriginal = \"resnet-mini.onnx\"\nmodels = [\"resnet-mini.onnx\"]\n\
         [recipe]\nepochs = 1\nlimit = 50\n",
    )
    .expect("sweep file");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).expect("out");
    let lock = std::fs::File::create(out.join("sweep.lock")).expect("lock file");
    // SAFETY: flock(2) on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    std::fs::write(out.join("sweep.lock"), format!("{}\n", std::process::id())).expect("pid");
    let r = stretch(&["sweep", &arg(&dir.join("s.toml")), "-o", &arg(&out)]);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "a second sweep ran in a directory in use: {e}");
    assert!(
        e.contains(&out.display().to_string()) && e.contains(&format!("pid {}", std::process::id())),
        "{e}"
    );
    assert!(!out.join("state.json").exists(), "jobs were started");
    drop(lock);
}

#[test]
fn ctrl_c_stops_the_sweep_with_exit_status_130() {
    let dir = scratch("sweep-sigint");
    zoo(&dir);
    std::fs::write(
        dir.join("s.toml"),
        "dataset = \"digits\"\noriginal = \"resnet-mini.onnx\"\nmodels = [\"resnet-mini.onnx\"]\n\
         [recipe]\nepochs = 200\n",
    )
    .expect("sweep file");
    let out = dir.join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_stretch"))
        .args(["sweep", &arg(&dir.join("s.toml")), "-o", &arg(&out)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the sweep");
    let start = Instant::now();
    while !phases(&out).iter().any(|(_, p)| p == "running") {
        assert!(start.elapsed() < Duration::from_secs(120), "no job started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) of the sweep this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let r = child.wait_with_output().expect("wait");
    let e = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(130), "{e}");
    assert!(e.contains("interrupted"), "{e}");
    assert!(phases(&out).iter().any(|(_, p)| p == "stopped"), "{:?}", phases(&out));
}

/// The example sweeps in configs/sweeps/ expand into jobs whose command
/// lines `stretch` accepts; a dry run writes nothing.
#[test]
fn the_example_sweeps_expand_into_commands_stretch_accepts() {
    let dir = scratch("sweep-examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(repo().join("configs/sweeps")).expect("configs/sweeps") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let out = dir.join("out");
        let spec = std::fs::read_to_string(&path).expect("sweep file");
        let data = spec.lines().find_map(|l| l.strip_prefix("dataset = \"mnist:"));
        if let Some(data) = data.map(|d| d.trim_end_matches('"'))
            && !Path::new(data).exists()
        {
            let r = stretch(&["sweep", &arg(&path), "-o", &arg(&out), "--dry-run"]);
            let stderr = String::from_utf8_lossy(&r.stderr);
            assert!(!r.status.success() && stderr.contains("does not exist"), "{stderr}");
            seen += 1;
            continue;
        }
        let text = stretch_ok(&["sweep", &arg(&path), "-o", &arg(&out), "--dry-run"]);
        assert!(
            text.contains("stretch train ") && text.contains("# s0-original"),
            "{text}"
        );
        assert!(!out.exists(), "{}: the dry run wrote {}", path.display(), out.display());
        seen += 1;
    }
    assert!(seen >= 2, "{seen} example sweeps");
}

/// scripts/cluster/ray_local.sh refuses a cluster that listens beyond
/// loopback: its listener check run on `ss -ltnpH` lines.
#[test]
fn the_ray_script_refuses_listeners_beyond_loopback() {
    let dir = scratch("ray-listeners");
    let check = |lines: &str, pids: &[&str]| {
        let file = dir.join("ss.txt");
        std::fs::write(&file, lines).expect("ss output");
        let r = Command::new("bash")
            .arg(repo().join("scripts/cluster/ray_local.sh"))
            .arg("--check-listeners")
            .arg(&file)
            .args(pids)
            .output()
            .expect("run the script");
        (r.status.success(), String::from_utf8_lossy(&r.stdout).into_owned())
    };
    let loopback = "LISTEN 0 4096 [::ffff:127.0.0.1]:6390 *:* users:((\"gcs_server\",pid=11,fd=44))\n\
                    LISTEN 0 128 127.0.0.1:8266 0.0.0.0:* users:((\"python\",pid=12,fd=59))\n\
                    LISTEN 0 128 [::1]:8267 [::]:* users:((\"python\",pid=12,fd=60))\n\
                    LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:((\"sshd\",pid=99,fd=3))\n";
    assert_eq!(check(loopback, &["11", "12"]), (true, String::new()));
    for bad in [
        "LISTEN 0 4096 *:6390 *:* users:((\"gcs_server\",pid=11,fd=44))\n",
        "LISTEN 0 128 0.0.0.0:44217 0.0.0.0:* users:((\"python\",pid=12,fd=21))\n",
        "LISTEN 0 128 192.0.2.2:52365 0.0.0.0:* users:((\"ray::DashboardA\",pid=12,fd=38))\n",
        "LISTEN 0 4096 [::]:37519 [::]:* users:((\"raylet\",pid=11,fd=40))\n",
    ] {
        let (ok, said) = check(&format!("{loopback}{bad}"), &["11", "12"]);
        assert!(!ok, "{bad} was accepted");
        assert_eq!(said, format!("not on loopback: {bad}"), "{bad}");
    }
}
