//! `stretch train` and `stretch compare-accuracy` on the bundled digits:
//! learning happens, an interrupted and resumed run ends bit-identical to an
//! uninterrupted one (one thread), distillation runs, and bad input fails
//! naming what is wrong.

mod common;

use common::*;

/// A zoo model for 16x16 inputs and `classes` classes.
fn zoo(dir: &std::path::Path, name: &str, classes: &str) -> String {
    let m = arg(&dir.join(format!("{name}-{classes}.onnx")));
    stretch_ok(&[
        "zoo",
        name,
        "--input-size",
        "16",
        "--classes",
        classes,
        "--seed",
        "1",
        "-o",
        &m,
    ]);
    m
}

fn train(model: &str, out: &str, extra: &[&str]) -> std::process::Output {
    let defaults = [
        ("--epochs", "3"),
        ("--batch-size", "64"),
        ("--lr", "0.05"),
        ("--seed", "3"),
        ("--threads", "1"),
    ];
    let mut args = vec!["train", model, "--dataset", "digits", "-o", out];
    for (k, v) in defaults {
        if !extra.contains(&k) {
            args.extend_from_slice(&[k, v]);
        }
    }
    args.extend_from_slice(extra);
    stretch(&args)
}

#[test]
fn resumed_run_is_bit_identical_to_an_uninterrupted_one() {
    let dir = scratch("train-resume");
    let m = zoo(&dir, "resnet-mini", "10");
    let full = arg(&dir.join("full.onnx"));
    let out = train(&m, &full, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("epoch   3/3"), "{text}");
    let first: f64 = text
        .lines()
        .find(|l| l.contains("epoch   1/3"))
        .and_then(|l| l.split("val loss ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("epoch 1 validation loss");
    let last: f64 = text
        .lines()
        .find(|l| l.contains("epoch   3/3"))
        .and_then(|l| l.split("val loss ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("epoch 3 validation loss");
    assert!(last < first, "validation loss did not fall: {first} -> {last}\n{text}");
    let part = arg(&dir.join("part.onnx"));
    let ckpt = arg(&dir.join("part.ckpt"));
    let out = train(&m, &part, &["--stop-after", "2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("epoch   3/3"));
    let out = train(&m, &part, &["--resume", &ckpt]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("resumed from") && text.contains("after epoch 2"),
        "{text}"
    );
    let a = std::fs::read(&full).expect("full");
    let b = std::fs::read(&part).expect("resumed");
    assert!(a == b, "resumed model differs from the uninterrupted one");
    let g = graph_ir::onnx::import_file(std::path::Path::new(&full), &Default::default()).expect("trained model");
    let (mean, std) = g
        .input_normalisation()
        .expect("the training normalisation in the model's metadata");
    assert!(
        mean.len() == 3 && std.len() == 3 && std.iter().all(|s| *s > 0.0),
        "{mean:?} {std:?}"
    );
    let csv = |p: &str| -> Vec<String> {
        std::fs::read_to_string(p)
            .expect("csv")
            .lines()
            .map(|l| l.split(',').take(7).collect::<Vec<_>>().join(","))
            .collect()
    };
    let (ca, cb) = (
        csv(&arg(&dir.join("full.metrics.csv"))),
        csv(&arg(&dir.join("part.metrics.csv"))),
    );
    assert_eq!(ca.len(), 4);
    assert_eq!(ca, cb, "metrics differ");
    let svg = std::fs::read_to_string(dir.join("full.curve.svg")).expect("curve");
    assert!(svg.contains("<polyline") && svg.contains("validation"));
    reference(&["check", &full]);
    let other = train(&m, &arg(&dir.join("x.onnx")), &["--resume", &ckpt, "--lr", "0.1"]);
    let e = String::from_utf8_lossy(&other.stderr);
    assert!(
        !other.status.success() && e.contains("another recipe") && e.contains("lr 0.05 in the checkpoint"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_named() {
    let dir = scratch("train-errors");
    let m7 = zoo(&dir, "resnet-mini", "7");
    let out = arg(&dir.join("o.onnx"));
    let r = train(&m7, &out, &["--epochs", "1"]);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(
        !r.status.success()
            && e.contains("outputs 7 scores")
            && e.contains("10 classes")
            && e.contains("--replace-head"),
        "{e}"
    );
    let r = train(&m7, &out, &["--epochs", "1", "--replace-head"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("by a fresh 10-way one"));
    let r = stretch(&["train", &m7, "--dataset", "cifar10:/nonexistent/cifar", "-o", &out]);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(
        !r.status.success() && e.contains("/nonexistent/cifar: does not exist"),
        "{e}"
    );
    let bogus = dir.join("bogus.bin");
    std::fs::write(&bogus, b"12345").expect("write");
    let r = stretch(&[
        "train",
        &m7,
        "--dataset",
        &format!("cifar10:{}", arg(&bogus)),
        "-o",
        &out,
    ]);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(
        !r.status.success() && e.contains("bogus.bin") && e.contains("3073 bytes"),
        "{e}"
    );
    let m10 = zoo(&dir, "resnet-mini", "10");
    let good = arg(&dir.join("good.ckpt"));
    let r = train(&m10, &out, &["--epochs", "1", "--checkpoint", &good]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let before = std::fs::read(&good).expect("checkpoint");
    let r = train(
        &m10,
        &out,
        &[
            "--epochs",
            "1",
            "--lr",
            "1e30",
            "--schedule",
            "constant",
            "--checkpoint",
            &good,
        ],
    );
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(
        !r.status.success() && e.contains("at epoch 1, batch") && e.contains("training stopped"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(&good).expect("checkpoint"),
        before,
        "the last good checkpoint was touched"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn distillation_and_compare_accuracy_run() {
    let dir = scratch("train-kd");
    let m = zoo(&dir, "resnet-mini", "10");
    let host = arg(&repo().join("configs/devices/host.toml"));
    let b = arg(&dir.join("branched.onnx"));
    stretch_ok(&["stretch", &m, "--device", &host, "--alpha", "1", "-o", &b]);
    let out = arg(&dir.join("kd.onnx"));
    let r = train(
        &b,
        &out,
        &[
            "--epochs",
            "1",
            "--teacher",
            &m,
            "--kd-alpha",
            "0.7",
            "--kd-temperature",
            "3",
        ],
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let kd_term = |out: &[u8]| -> Option<f64> {
        let text = String::from_utf8_lossy(out);
        let rest = text.split("(distillation term ").nth(1)?;
        rest.split(')').next()?.parse().ok()
    };
    let term = kd_term(&r.stdout);
    assert!(
        term.is_some_and(|t| t.is_finite() && t > 0.0),
        "no distillation term logged: {}",
        String::from_utf8_lossy(&r.stdout)
    );
    let plain = [arg(&dir.join("plain1.onnx")), arg(&dir.join("plain2.onnx"))];
    for p in &plain {
        let r = train(&b, p, &["--epochs", "1"]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        assert_eq!(kd_term(&r.stdout), None, "a distillation term without a teacher");
    }
    let bytes = |p: &str| std::fs::read(p).expect("trained model");
    assert_eq!(
        bytes(&plain[0]),
        bytes(&plain[1]),
        "training with one seed is not deterministic"
    );
    assert_ne!(
        bytes(&out),
        bytes(&plain[0]),
        "the teacher did not change the trained weights"
    );
    let compare = |branched: &[&str], extra: &[&str], name: &str| -> (String, serde_json::Value) {
        let (out_dir, json) = (arg(&dir.join(name)), arg(&dir.join(format!("{name}.json"))));
        let mut args = vec!["compare-accuracy", m.as_str()];
        args.extend_from_slice(branched);
        args.extend_from_slice(&[
            "--dataset",
            "digits",
            "--epochs",
            "1",
            "--threads",
            "1",
            "--distill",
            "--out-dir",
            &out_dir,
            "--json",
            &json,
        ]);
        args.extend_from_slice(extra);
        let out = stretch_ok(&args);
        let report = serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("valid json");
        (out, report)
    };
    let cmp_dir = dir.join("cmp");
    let (cmp, report) = compare(&[&b], &[], "cmp");
    assert!(
        cmp.contains("original") && cmp.contains("-kd") && cmp.contains("gap = branched - original"),
        "{cmp}"
    );
    assert_eq!(report["schema"], "stretch.compare-accuracy/1");
    let recipe = &report["recipe"];
    assert_eq!(
        (&recipe["epochs"], &recipe["batch_size"], &recipe["distill"]["alpha"]),
        (&serde_json::json!(1), &serde_json::json!(64), &serde_json::json!(0.5)),
        "{recipe}"
    );
    let rows = report["rows"].as_array().expect("rows");
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().expect("label")).collect();
    let distilled: Vec<bool> = rows.iter().map(|r| r["distilled"].as_bool().expect("flag")).collect();
    assert_eq!(labels.len(), 3, "{labels:?}");
    assert_eq!(labels[0], "original");
    assert_eq!(distilled, [false, false, true], "{labels:?}");
    for r in &rows[1..] {
        let gap = r["top1"].as_f64().expect("top1") - rows[0]["top1"].as_f64().expect("top1");
        assert!((r["gap_top1"].as_f64().expect("gap") - gap).abs() < 1e-9, "{r}");
    }
    let trained = |label: &str| std::fs::read(cmp_dir.join(format!("{label}.onnx"))).expect("trained model");
    assert_ne!(
        trained(labels[1]),
        trained(labels[2]),
        "--distill trained the branched model as without a teacher"
    );
    let par_dir = dir.join("cmp-jobs");
    let (_, par) = compare(&[&b, &b], &["--jobs", "3"], "cmp-jobs");
    let par_rows = par["rows"].as_array().expect("rows");
    assert_eq!(par_rows.len(), 5, "{par}");
    for (i, par) in par_rows.iter().enumerate() {
        let seq = &rows[[0, 1, 1, 2, 2][i]];
        for key in ["distilled", "top1", "top5", "gap_top1"] {
            assert_eq!(seq[key], par[key], "--jobs 3 changed {key}: {seq} vs {par}");
        }
        let seq_label = seq["label"].as_str().expect("label");
        let par_label = par["label"].as_str().expect("label");
        assert!(
            trained(seq_label) == std::fs::read(par_dir.join(format!("{par_label}.onnx"))).expect("trained model"),
            "{par_label} trained side by side (--jobs 3) differs from {seq_label} trained alone"
        );
    }
    let r = stretch(&[
        "compare-accuracy",
        &m,
        &b,
        "--dataset",
        "digits",
        "--kd-alpha",
        "0.3",
        "--out-dir",
        &arg(&cmp_dir),
    ]);
    assert!(!r.status.success());
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("needs --distill"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn distillation_and_augmentation_values_are_checked() {
    let dir = scratch("train-options");
    let m = zoo(&dir, "resnet-mini", "10");
    let out = arg(&dir.join("o.onnx"));
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--kd-alpha", "5"], &["--kd-alpha 5", "[0, 1]"]),
        (&["--kd-alpha", "0.3"], &["--kd-alpha 0.3", "needs --teacher"]),
        (&["--kd-temperature", "2"], &["--kd-temperature 2", "needs --teacher"]),
        (&["--augment", "crop:1000"], &["augment", "crop:1000", "16x16"]),
        (&["--augment", "flip,crop:16"], &["augment", "crop:16", "below 16"]),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["--epochs", "1"];
        args.extend_from_slice(extra);
        let r = train(&m, &out, &args);
        let e = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success(), "{extra:?} was accepted");
        assert!(e.starts_with("error: ") && e.lines().count() == 1, "{extra:?}: {e}");
        for x in expected {
            assert!(e.contains(x), "{extra:?}: {e}");
        }
    }
    assert!(!dir.join("o.onnx").exists());
    let r = train(&m, &out, &["--epochs", "1", "--augment", "crop:2,flip"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bundled_digits_are_found_from_the_working_directory_up() {
    let dir = scratch("digits-lookup");
    let digits = dir.join("checkout/data/datasets/digits");
    std::fs::create_dir_all(&digits).unwrap();
    std::fs::create_dir_all(dir.join("checkout/sub")).unwrap();
    let all = std::fs::read(repo().join("data/datasets/digits/digits.csv.gz")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&all[..]), &mut text).unwrap();
    let first: String = text.lines().take(30).map(|l| format!("{l}\n")).collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, first.as_bytes()).unwrap();
    std::fs::write(digits.join("digits.csv.gz"), gz.finish().unwrap()).unwrap();
    let m = zoo(&dir, "resnet-mini", "10");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stretch"))
        .args(["train", &m, "--dataset", "digits", "--epochs", "1", "-o"])
        .arg(dir.join("out.onnx"))
        .current_dir(dir.join("checkout/sub"))
        .env_remove("STRETCH_DATA")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(": 30 images"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// compare-accuracy checks every model before training any: a missing file
/// or a model with other classes fails naming the file, with nothing trained.
#[test]
fn compare_accuracy_checks_every_model_before_training() {
    let dir = scratch("compare-preflight");
    let m = zoo(&dir, "resnet-mini", "10");
    let three = zoo(&dir, "resnet-mini", "3");
    let missing = arg(&dir.join("missing.onnx"));
    for (bad, expected) in [(&missing, "missing.onnx"), (&three, "resnet-mini-3.onnx")] {
        let out = dir.join("cmp");
        let r = stretch(&[
            "compare-accuracy",
            &m,
            &m,
            bad,
            "--dataset",
            "digits",
            "--epochs",
            "1",
            "--out-dir",
            &arg(&out),
        ]);
        let e = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success(), "{bad} was accepted");
        assert!(e.contains(expected), "{bad}: {e}");
        assert!(
            !out.join("original.onnx").exists(),
            "{bad}: the original trained before the check"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
