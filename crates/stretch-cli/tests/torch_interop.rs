//! `stretch export --format torch` and `stretch import-weights` without
//! torch: a branched model exported and its weights imported back untrained
//! is the same model (every weight bit for bit, every name and annotation),
//! and a changed tensor lands in its initializer; `model.py` and every
//! script of `scripts/torch` compile; the state dict's keys and shapes are
//! the graph's constants; and each bad input is one error line naming the
//! key, file or node.

mod common;

use common::{arg, python, repo, scratch, stretch, stretch_ok};
use graph_ir::{Graph, Op};
use std::path::Path;
use std::process::Command;

/// resnet-mini at 32x32 branched on the host's two cores into `dir/b.onnx`;
/// the original at `dir/m.onnx`.
fn branched(dir: &Path) -> (String, String) {
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "5", "--input-size", "32", "-o", &m]);
    let b = arg(&dir.join("b.onnx"));
    let host = arg(&repo().join("configs/devices/host.toml"));
    stretch_ok(&[
        "stretch",
        &m,
        "--device",
        &host,
        "--processors",
        "cpu0,cpu1",
        "--alpha",
        "1",
        "-o",
        &b,
    ]);
    (m, b)
}

fn import(p: &str) -> Graph {
    graph_ir::onnx::import_file(p, &Default::default()).expect("import")
}

/// Every node of `a` is in `b` with the same op (constants bit for bit),
/// inputs and annotations.
fn same(a: &Graph, b: &Graph) {
    assert_eq!(a.len(), b.len());
    for id in a.node_ids() {
        let n = a.node(id);
        let m = b.node(b.find(&n.name).unwrap_or_else(|| panic!("`{}` is gone", n.name)));
        assert_eq!(n.annotations, m.annotations, "{}", n.name);
        match (&n.op, &m.op) {
            (Op::Const(x), Op::Const(y)) => assert_eq!(x.raw(), y.raw(), "{}", n.name),
            (x, y) => assert_eq!(x, y, "{}", n.name),
        }
    }
    assert_eq!(a.metadata, b.metadata);
}

/// `stretch args` fails with one `error:` line holding every `want`.
fn fails(args: &[&str], want: &[&str]) {
    let out = stretch(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "stretch {args:?} succeeded");
    assert_eq!(err.trim_end().lines().count(), 1, "one line expected:\n{err}");
    for w in want {
        assert!(err.contains(w), "want `{w}`:\n{err}");
    }
}

#[test]
fn an_exported_model_comes_back_unchanged_and_model_py_compiles() {
    let dir = scratch("torch-roundtrip");
    let (_, b) = branched(&dir);
    let out = dir.join("torch");
    let text = stretch_ok(&["export", &b, "--format", "torch", "-o", &arg(&out)]);
    assert!(
        text.contains("stage0.branch_cpu0, stage0.branch_cpu1, stage0.merge"),
        "{text}"
    );
    let mut scripts: Vec<_> = std::fs::read_dir(repo().join("scripts/torch"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 4, "{scripts:?}");
    let py = Command::new(python())
        .args(["-m", "py_compile", &arg(&out.join("model.py"))])
        .args(&scripts)
        .output()
        .expect("run python");
    assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
    let g = import(&b);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("stretch-torch.json")).unwrap()).unwrap();
    let weights = std::fs::read(out.join("weights.safetensors")).unwrap();
    let st = torch_io::safetensors::read(&weights, "weights.safetensors").unwrap();
    let keys = manifest["keys"].as_array().unwrap();
    assert!(keys.len() > 10, "{} keys", keys.len());
    for k in keys {
        let key = k["key"].as_str().unwrap();
        let node = g
            .find(k["initializer"].as_str().unwrap())
            .expect("an initializer of the graph");
        let shape = &g.node(node).outputs[0].shape;
        assert_eq!(&st.tensors[key].shape, shape, "{key}");
        assert!(
            key.starts_with("stem.") || key.starts_with("stage") || key.starts_with("head."),
            "{key}"
        );
    }
    assert_eq!(st.metadata["stretch.fingerprint"], g.fingerprint().unwrap());
    let t = arg(&dir.join("t.onnx"));
    let text = stretch_ok(&[
        "import-weights",
        &b,
        "--from",
        &arg(&out.join("weights.safetensors")),
        "-o",
        &t,
    ]);
    assert!(text.contains("annotations kept"), "{text}");
    same(&g, &import(&t));
    let mut st = torch_io::safetensors::read(&weights, "w").unwrap();
    let k = keys
        .iter()
        .find(|k| k["key"].as_str().unwrap().ends_with(".weight"))
        .unwrap();
    let key = k["key"].as_str().unwrap();
    if let torch_io::safetensors::Data::F32(v) = &mut st.tensors.get_mut(key).unwrap().data {
        v.iter_mut().for_each(|x| *x = *x * 2.0 + 1.0);
    }
    let trained = dir.join("trained.safetensors");
    std::fs::write(&trained, torch_io::safetensors::write(&st.tensors, &st.metadata)).unwrap();
    stretch_ok(&["import-weights", &b, "--from", &arg(&trained), "-o", &t]);
    let back = import(&t);
    let name = k["initializer"].as_str().unwrap();
    let before = g
        .const_tensor(g.find(name).unwrap().out(0))
        .unwrap()
        .to_f32_vec()
        .unwrap();
    let after = back
        .const_tensor(back.find(name).unwrap().out(0))
        .unwrap()
        .to_f32_vec()
        .unwrap();
    assert!(
        before.iter().zip(&after).all(|(a, b)| *b == *a * 2.0 + 1.0),
        "{key} was not written"
    );
}

#[test]
fn bad_weights_and_models_are_refused_by_name() {
    let dir = scratch("torch-refusals");
    let (m, b) = branched(&dir);
    let out = dir.join("torch");
    stretch_ok(&["export", &b, "--format", "torch", "-o", &arg(&out)]);
    let original = dir.join("original");
    stretch_ok(&["export", &m, "--format", "torch", "-o", &arg(&original)]);
    let t = arg(&dir.join("t.onnx"));
    let good = std::fs::read(out.join("weights.safetensors")).unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        arg(&p)
    };
    let cut = file("cut.safetensors", &good[..good.len() - 100]);
    fails(
        &["import-weights", &b, "--from", &cut, "-o", &t],
        &["cut.safetensors", "truncated"],
    );
    let mut st = torch_io::safetensors::read(&good, "w").unwrap();
    let key = st.tensors.keys().find(|k| k.ends_with(".weight")).unwrap().clone();
    if let torch_io::safetensors::Data::F32(v) = &mut st.tensors.get_mut(&key).unwrap().data {
        v[3] = f32::NAN;
    }
    let nan = file(
        "nan.safetensors",
        &torch_io::safetensors::write(&st.tensors, &st.metadata),
    );
    fails(
        &["import-weights", &b, "--from", &nan, "-o", &t],
        &[&key, "NaN", "element 3"],
    );
    let mut fewer = torch_io::safetensors::read(&good, "w").unwrap();
    fewer.tensors.remove(&key);
    fewer.metadata.clear();
    let missing = file(
        "missing.safetensors",
        &torch_io::safetensors::write(&fewer.tensors, &fewer.metadata),
    );
    fails(
        &["import-weights", &b, "--from", &missing, "-o", &t],
        &[&key, "is missing"],
    );
    let orig = arg(&original.join("weights.safetensors"));
    fails(
        &["import-weights", &b, "--from", &orig, "-o", &t],
        &["weights.safetensors", "another model"],
    );
    fails(
        &["import-weights", &b, "--from", &file("w.pt", b"PK"), "-o", &t],
        &["w.pt", "to_safetensors.py"],
    );
    assert!(!Path::new(&t).exists(), "a refused import wrote {t}");
    let q = arg(&dir.join("q.onnx"));
    let pair = dir.join("pair.toml");
    std::fs::write(&pair, common::INT8_PAIR).unwrap();
    stretch_ok(&[
        "quantize",
        &b,
        "--device",
        &arg(&pair),
        "--calibration",
        "digits",
        "--samples",
        "4",
        "-o",
        &q,
    ]);
    fails(
        &["export", &q, "--format", "torch", "-o", &arg(&dir.join("q"))],
        &["QuantizeLinear", "no PyTorch form"],
    );
    let bare = arg(&dir.join("bare.onnx"));
    let strip = "import onnx, sys\nm = onnx.load(sys.argv[1])\nfor n in m.graph.node:\n    n.ClearField('metadata_props')\nonnx.save(m, sys.argv[2])";
    let py = Command::new(python())
        .args(["-c", strip, &b, &bare])
        .output()
        .expect("run python");
    assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
    fails(
        &["export", &bare, "--format", "torch", "-o", &arg(&dir.join("bare"))],
        &["branched", "no stage annotations"],
    );
}

#[test]
fn the_trained_normalisation_is_recorded_and_bad_ones_are_refused() {
    let dir = scratch("torch-normalisation");
    let (_, b) = branched(&dir);
    let out = dir.join("torch");
    stretch_ok(&["export", &b, "--format", "torch", "-o", &arg(&out)]);
    let good = torch_io::safetensors::read(&std::fs::read(out.join("weights.safetensors")).unwrap(), "w").unwrap();
    let with = |name: &str, pairs: &[(&str, &str)]| {
        let mut meta = good.metadata.clone();
        for (k, v) in pairs {
            meta.insert(k.to_string(), v.to_string());
        }
        let p = dir.join(name);
        std::fs::write(&p, torch_io::safetensors::write(&good.tensors, &meta)).unwrap();
        arg(&p)
    };
    let (mean, std) = ("stretch.input_mean", "stretch.input_std");
    let t = arg(&dir.join("t.onnx"));
    let norm = with("norm.safetensors", &[(mean, "0.25,0.5,0.75"), (std, "0.5,1,2")]);
    let text = stretch_ok(&["import-weights", &b, "--from", &norm, "-o", &t]);
    assert!(text.contains("input normalisation from the file"), "{text}");
    assert_eq!(
        import(&t).input_normalisation(),
        Some((vec![0.25, 0.5, 0.75], vec![0.5, 1.0, 2.0]))
    );
    let one = with("one.safetensors", &[(mean, "0.1,0.2,0.3")]);
    fails(
        &["import-weights", &b, "--from", &one, "-o", &t],
        &[
            "one.safetensors",
            "has `stretch.input_mean` but not `stretch.input_std`",
        ],
    );
    let two = with("two.safetensors", &[(mean, "0.1,0.2"), (std, "1,1")]);
    fails(
        &["import-weights", &b, "--from", &two, "-o", &t],
        &[
            "two.safetensors",
            "`stretch.input_mean` has 2 value(s) for a 3-channel input",
        ],
    );
    let zero = with("zero.safetensors", &[(mean, "0,0,0"), (std, "1,0,1")]);
    fails(
        &["import-weights", &b, "--from", &zero, "-o", &t],
        &["zero.safetensors", "`stretch.input_std` holds 0"],
    );
}
