//! A bundle is a file people download: `stretch-run` and `stretch predict
//! --bundle` read nothing outside it and never block or fill memory on
//! what it names, and `--check` never passes on NaN. Each hostile bundle
//! is refused in one line naming the manifest entry, before anything runs.

mod common;

use common::{arg, repo, scratch, stretch, stretch_ok, stretch_run, stretch_run_ok};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// resnet-mini at 32x32 branched on the host's two cores, exported
/// without `.ort` files into `dir/good`; its manifest.
fn good_bundle(dir: &Path) -> (PathBuf, bundle::Manifest) {
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "3", "-o", &m]);
    let b = arg(&dir.join("b.onnx"));
    let host = arg(&repo().join("configs/devices/host.toml"));
    let p = ["--processors", "cpu0,cpu1", "--alpha", "1"];
    stretch_ok(&["stretch", &m, "--device", &host, p[0], p[1], p[2], p[3], "-o", &b]);
    let good = dir.join("good");
    stretch_ok(&["export", &b, "--device", &host, "--no-ort", "-o", &arg(&good)]);
    let manifest = bundle::Bundle::open(&good).expect("the good bundle opens").manifest;
    (good, manifest)
}

fn copy(from: &Path, to: &Path) -> PathBuf {
    common::copy_files(from, to)
}

fn edit(dir: &Path, f: impl FnOnce(&mut Value)) {
    common::edit_manifest(dir, f)
}

/// `stretch-run` fails with one line holding `want` and runs nothing.
fn refused(args: &[&str], want: &str) {
    let out = stretch_run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "stretch-run {args:?} succeeded");
    assert_eq!(err.lines().count(), 1, "one line expected:\n{err}");
    assert!(
        err.starts_with("error: ") && err.contains(want),
        "want `{want}`:\n{err}"
    );
}

#[test]
fn hostile_bundles_are_refused_naming_the_entry() {
    let dir = scratch("bundle-hostile");
    let (good, m) = good_bundle(&dir);
    let second = m.subgraphs[1].model.file.clone();
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::copy(good.join(&second), outside.join(&second)).unwrap();
    let entry = "manifest entry `subgraphs[1].model`";

    // Each names a file whose bytes and hash are right: only where it is differs.
    let d = copy(&good, &dir.join("traversal"));
    edit(&d, |v| {
        v["subgraphs"][1]["model"]["file"] = format!("../outside/{second}").into()
    });
    refused(
        &[&arg(&d)],
        &format!("{entry} names `../outside/{second}`, which leaves the bundle"),
    );
    let device = arg(&repo().join("configs/devices/host.toml"));
    let out = stretch(&["predict", "--bundle", &arg(&d), "--device", &device]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("which leaves the bundle"),
        "{err}"
    );

    let d = copy(&good, &dir.join("absolute"));
    let abs = arg(&outside.join(&second));
    edit(&d, |v| v["subgraphs"][1]["model"]["file"] = abs.clone().into());
    refused(
        &[&arg(&d)],
        &format!("{entry} names `{abs}`, which is an absolute path"),
    );

    let d = copy(&good, &dir.join("passwd"));
    edit(&d, |v| v["reference"]["outputs"][0]["file"] = "/etc/passwd".into());
    refused(
        &[&arg(&d)],
        "`reference.outputs[0]` names `/etc/passwd`, which is an absolute path",
    );

    let d = copy(&good, &dir.join("dev-zero"));
    edit(&d, |v| {
        v["subgraphs"][0]["model"]["file"] = "/dev/zero".into();
        v["subgraphs"][0]["model"]["bytes"] = (u64::MAX / 2).into();
    });
    refused(&[&arg(&d)], "which the manifest sizes at");

    let d = copy(&good, &dir.join("link-file"));
    std::fs::remove_file(d.join(&second)).unwrap();
    std::os::unix::fs::symlink(outside.join(&second), d.join(&second)).unwrap();
    refused(
        &[&arg(&d)],
        &format!("{entry} names `{second}`, which is a link that leads outside the bundle"),
    );

    let d = copy(&good, &dir.join("link-dir"));
    std::os::unix::fs::symlink(&outside, d.join("sub")).unwrap();
    edit(&d, |v| {
        v["subgraphs"][1]["model"]["file"] = format!("sub/{second}").into()
    });
    refused(&[&arg(&d)], "which is a link that leads outside the bundle");

    let d = copy(&good, &dir.join("fifo"));
    std::fs::remove_file(d.join(&second)).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(d.join(&second))
        .status()
        .unwrap();
    assert!(made.success());
    refused(&[&arg(&d)], &format!("{entry} names `{second}`, which is a FIFO"));

    let d = copy(&good, &dir.join("larger"));
    edit(&d, |v| {
        v["subgraphs"][1]["model"]["bytes"] = (m.subgraphs[1].model.bytes - 1).into()
    });
    refused(&[&arg(&d)], "more than the");

    // A link that stays inside the bundle is a file of the bundle.
    let d = copy(&good, &dir.join("link-inside"));
    std::fs::rename(d.join(&second), d.join("moved.onnx")).unwrap();
    std::os::unix::fs::symlink("moved.onnx", d.join(&second)).unwrap();
    let text = stretch_run_ok(&[&arg(&d), "--check"]);
    assert!(text.contains("check: output 0"), "{text}");
}

#[test]
fn check_fails_on_nan_and_on_a_bundle_without_outputs() {
    let dir = scratch("bundle-nan");
    let (good, m) = good_bundle(&dir);
    // The classifier's bias set to NaN in the last subgraph's file (its
    // bytes found in the file, then the manifest's size and hash redone).
    let d = copy(&good, &dir.join("nan-output"));
    let last = m.subgraphs.last().unwrap().model.file.clone();
    let g = graph_ir::onnx::import_file(d.join(&last), &Default::default()).unwrap();
    let head = g.outputs()[0].1.node;
    let bias = g.node(head).inputs[2].node;
    let graph_ir::Op::Const(t) = &g.node(bias).op else {
        panic!("the classifier's bias is a constant")
    };
    let le: Vec<u8> = t.to_f32_vec().unwrap().iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut bytes = std::fs::read(d.join(&last)).unwrap();
    let at = bytes.windows(le.len()).position(|w| w == le).expect("the bias's bytes");
    bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(d.join(&last), bytes).unwrap();
    let f = bundle::FileRef::of(&d, &last).unwrap();
    let i = m.subgraphs.len() - 1;
    edit(&d, |v| v["subgraphs"][i]["model"] = serde_json::to_value(f).unwrap());
    refused(
        &[&arg(&d), "--check"],
        "check failed: output 0 (`head.fc`) holds NaN at element 0",
    );

    let d = copy(&good, &dir.join("nan-reference"));
    let r = m.reference.outputs[0].file.clone();
    let mut y = scheduler_rt::npy::read(&d.join(&r)).unwrap();
    y.data[3] = f32::NAN;
    scheduler_rt::npy::write(&d.join(&r), &y).unwrap();
    let f = bundle::FileRef::of(&d, &r).unwrap();
    edit(&d, |v| v["reference"]["outputs"][0] = serde_json::to_value(f).unwrap());
    refused(&[&arg(&d), "--check"], "holds NaN at element 3");

    let d = copy(&good, &dir.join("no-outputs"));
    edit(&d, |v| {
        v["outputs"] = Value::Array(vec![]);
        v["reference"]["outputs"] = Value::Array(vec![]);
    });
    refused(&[&arg(&d), "--check"], "manifest: the model has no outputs");
}
