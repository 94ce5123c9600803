//! `stretch profile --quick`: a row with positive timings for every kernel
//! class, run.json, a rerun that resumes and adds nothing, kernels timed
//! inside a model and `fit`'s use of them, onnxruntime kernels as the
//! runtime runs them, and the errors for unusable
//! cores, threads and models.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;

const CLASSES: [&str; 9] = [
    "conv+bn+act",
    "dwconv+bn+act",
    "fc",
    "pool",
    "gap",
    "add+act",
    "bn+act",
    "act",
    "concat",
];

#[test]
fn quick_profile_covers_every_class_and_resumes() {
    let dir = scratch("profile-quick");
    let out = dir.to_string_lossy().into_owned();
    let args = [
        "profile",
        "--engine",
        "tract",
        "--threads",
        "1",
        "--cores",
        "0",
        "--quick",
        "--out",
        &out,
    ];
    let stdout = stretch_ok(&args);
    assert!(stdout.contains("0 already in"), "{stdout}");

    let csv = std::fs::read_to_string(dir.join("kernels.csv")).expect("kernels.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let mut per_class: BTreeMap<String, usize> = BTreeMap::new();
    for line in lines.clone() {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        let median: f64 = cells[col("median_ms")].parse().expect("median_ms");
        let p10: f64 = cells[col("p10_ms")].parse().expect("p10_ms");
        let p90: f64 = cells[col("p90_ms")].parse().expect("p90_ms");
        assert!(median > 0.0 && p10 <= median && median <= p90, "{line}");
        assert_eq!(
            (cells[col("engine")], cells[col("threads")], cells[col("cores")]),
            ("tract", "1", "0")
        );
        *per_class.entry(cells[col("class")].to_string()).or_default() += 1;
    }
    for class in CLASSES {
        assert!(
            per_class
                .get(class)
                .is_some_and(|n| *n >= predictor::fit::regressors::MIN_ROWS),
            "every class needs the rows a forest is fitted on: {class}: {per_class:?}"
        );
    }
    let adaptive = lines
        .filter(|l| l.split(',').nth(col("origin")) == Some("adaptive"))
        .count();
    assert!(adaptive > 0, "no adaptive rows");

    let run: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).expect("run.json"))
        .expect("run.json is JSON");
    assert_eq!(run["status"], "complete");
    assert_eq!(run["engine"]["name"], "tract");
    assert_eq!(run["settings"]["samples"], 8);
    let total: u64 = per_class.values().map(|n| *n as u64).sum();
    assert_eq!(run["summary"]["measured"].as_u64(), Some(total));

    let again = stretch_ok(&args);
    assert!(
        again.contains(&format!("0 kernels measured, {total} already in")),
        "{again}"
    );
    assert_eq!(std::fs::read_to_string(dir.join("kernels.csv")).expect("csv"), csv);
    let run: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).expect("run.json"))
        .expect("run.json is JSON");
    let inv = run["invocations"].as_array().expect("invocations");
    assert_eq!(inv.len(), 2);
    assert_eq!(
        (inv[0]["measured"].as_u64(), inv[1]["measured"].as_u64()),
        (Some(total), Some(0))
    );
    assert_eq!(inv[1]["resumed"].as_u64(), Some(total));

    let fitted = stretch_ok(&["fit", &out, "--processor", "cpu0"]);
    assert!(
        fitted.contains("out-of-fold") && fitted.contains("[processors.cpu0]"),
        "{fitted}"
    );
    let regs = dir.join("regressors.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&regs).expect("regressors.json")).expect("JSON");
    assert_eq!(doc["format"], "stretch.kernel-regressors/1");
    let model = repo().join("fixtures/models/resnet18.onnx");
    let predict = |extra: &[&str]| -> Value {
        let mut args = vec![
            "predict",
            model.to_str().expect("path"),
            "--device",
            "configs/devices/host.toml",
            "--processor",
            "cpu0",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_stretch"))
            .current_dir(repo())
            .args(&args)
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).expect("JSON")
    };
    let kinds = |v: &Value| -> Vec<String> {
        v["kernels"]
            .as_array()
            .expect("kernels")
            .iter()
            .map(|k| k["source"]["kind"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let with = predict(&["--regressors", regs.to_str().expect("path")]);
    assert!(kinds(&with).iter().any(|k| k == "regressor"), "{with}");
    let analytic = predict(&["--analytic"]);
    assert!(kinds(&analytic).iter().all(|k| k == "analytic"), "{analytic}");

    let mini = dir.join("mini.onnx");
    let mini = mini.to_str().expect("path");
    stretch_ok(&["zoo", "resnet-mini", "--input-size", "32", "-o", mini]);
    let timed = stretch_ok(&["profile", "--in-model", mini, "--reps", "3", "--out", &out]);
    let in_model = std::fs::read_to_string(dir.join("in-model.csv")).expect("in-model.csv");
    let rows: Vec<&str> = in_model.lines().skip(1).collect();
    assert!(
        timed.contains(&format!("appended {} rows", rows.len())) && rows.len() >= 10,
        "{timed}"
    );
    for row in &rows {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells[col("origin")], "in-model", "{row}");
        assert!(
            cells[col("median_ms")].parse::<f64>().expect("median_ms") > 0.0,
            "{row}"
        );
    }
    let prefer = stretch_ok(&["fit", &out, "--processor", "cpu0"]);
    assert!(
        prefer.contains(&format!("({} in-model rows, --in-model prefer)", rows.len())),
        "{prefer}"
    );
    let convs = rows.iter().filter(|r| r.starts_with("conv+bn+act,")).count();
    let conv_rows = |report: &str| -> usize {
        let line = report.lines().find(|l| l.starts_with("conv ")).expect("conv line");
        line.split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .expect("rows")
    };
    assert_eq!(conv_rows(&prefer), convs, "{prefer}");
    let ignore = stretch_ok(&["fit", &out, "--in-model", "ignore"]);
    assert!(!ignore.contains("in-model rows"), "{ignore}");
    assert_eq!(conv_rows(&ignore), per_class["conv+bn+act"], "{ignore}");

    std::fs::write(dir.join("kernels.csv"), format!("{csv}conv+bn+act,0,cnn,oops\n")).expect("write");
    let bad = stretch(&["fit", &out]);
    let err = String::from_utf8_lossy(&bad.stderr);
    let line = csv.lines().count() + 1;
    assert!(
        !bad.status.success() && (err.contains(&format!(":{line}")) || err.contains(&format!("line {line}"))),
        "{err}"
    );
}

#[test]
fn link_and_fusion_are_measured() {
    let dir = scratch("profile-link");
    let out = dir.to_string_lossy().into_owned();
    let link = stretch_ok(&["profile", "--link", "0,0", "--reps", "5", "--out", &out]);
    assert!(
        link.contains("fitted (measured)") && link.contains("piecewise (Puzzle"),
        "{link}"
    );
    let rows = std::fs::read_to_string(dir.join("link.csv")).expect("link.csv");
    assert_eq!(rows.lines().count(), 1 + 13, "4 KiB to 16 MiB, doubling: {rows}");
    let fusion = stretch_ok(&["profile", "--fusion", "--reps", "3", "--warmup", "1", "--out", &out]);
    assert!(fusion.contains("measured rules"), "{fusion}");
    let rows = std::fs::read_to_string(dir.join("fusion.csv")).expect("fusion.csv");
    assert_eq!(rows.lines().count(), 1 + 6, "{rows}");
    let bad = stretch(&["profile", "--link", "0", "--out", &out]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected FROM,TO"));
}

#[test]
fn unusable_cores_and_threads_are_errors() {
    let dir = scratch("profile-errors");
    let out = dir.to_string_lossy().into_owned();
    for (extra, want) in [
        (["--cores", "1023"], "core 1023 is not available"),
        (["--cores", "0-x"], "`x` is not a core number"),
        (["--threads", "2"], "--threads 2 needs at least 2 cores"),
    ] {
        let mut args = vec!["profile", "--quick", "--out", &out];
        args.extend(extra);
        let o = stretch(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{args:?}: {err}");
    }
    assert!(!dir.join("kernels.csv").exists());
    let bad = dir.join("bad.onnx");
    std::fs::write(&bad, "not onnx").expect("write");
    let o = stretch(&["profile", "--in-model", bad.to_str().expect("path"), "--out", &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("cannot import") && err.contains("bad.onnx"),
        "{err}"
    );
    assert!(!dir.join("in-model.csv").exists());
}

#[test]
fn onnxruntime_kernels_are_profiled_as_the_runtime_runs_them_and_fitted() {
    let dir = scratch("profile-ort");
    let out = dir.to_string_lossy().into_owned();
    stretch_ok(&["profile", "--engine", "ort", "--cores", "0", "--quick", "--out", &out]);
    let csv = std::fs::read_to_string(dir.join("kernels.csv")).expect("kernels.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let mut classes = std::collections::BTreeSet::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let median: f64 = cells[col("median_ms")].parse().expect("median_ms");
        assert!(median > 0.0, "{line}");
        assert_eq!((cells[col("engine")], cells[col("threads")]), ("ort", "1"), "{line}");
        classes.insert(cells[col("class")].to_string());
    }
    assert_eq!(classes.len(), CLASSES.len(), "{classes:?}");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).expect("run.json")).expect("json");
    assert_eq!(run["engine"]["name"], "ort");
    assert!(
        run["engine"]["version"].as_str().is_some_and(|v| !v.is_empty()),
        "{}",
        run["engine"]
    );
    stretch_ok(&["fit", &out, "--processor", "cpu0"]);
    let regs = std::fs::read_to_string(dir.join("regressors.json")).expect("regressors.json");
    assert!(regs.contains("\"engine\":\"ort\""), "the forests name their engine");

    let o = stretch(&["profile", "--engine", "ort", "--in-model", "m.onnx", "--out", &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("needs --engine tract"), "{err}");
}
