//! `stretch gradients`: one gradient per learnable key of the PyTorch
//! export, with that key's shape, and the gradient is the loss's slope: a
//! central difference of the training-mode loss along it (weights moved
//! through `import-weights`) equals its squared norm. Bad batches are one
//! error line naming the tensor, label or image.

mod common;

use common::{arg, scratch, stretch, stretch_ok};
use std::collections::BTreeMap;
use std::path::Path;
use torch_io::safetensors::{self, Data, Entry};

const N: usize = 4;

/// A bad batch: its name, images, labels and what the error must hold.
type Case = (&'static str, Option<Vec<f32>>, Vec<i64>, &'static [&'static str]);

fn f32s(e: &Entry) -> &[f32] {
    match &e.data {
        Data::F32(v) => v,
        Data::I64(_) => panic!("an int64 tensor"),
    }
}

fn read(p: &Path) -> safetensors::File {
    let bytes = std::fs::read(p).expect("read safetensors");
    safetensors::read(&bytes, &p.display().to_string()).expect("safetensors")
}

fn write_batch(p: &Path, images: Option<Vec<f32>>, labels: Vec<i64>) {
    let mut t = BTreeMap::new();
    if let Some(v) = images {
        let shape = vec![v.len() / (3 * 32 * 32), 3, 32, 32];
        t.insert(
            "images".to_string(),
            Entry {
                shape,
                data: Data::F32(v),
            },
        );
    }
    let shape = vec![labels.len()];
    t.insert(
        "labels".to_string(),
        Entry {
            shape,
            data: Data::I64(labels),
        },
    );
    std::fs::write(p, safetensors::write(&t, &BTreeMap::new())).expect("write batch");
}

/// The loss `stretch gradients` reports for `model` on `batch`, and its
/// gradients.
fn gradients(model: &str, batch: &Path, out: &Path) -> (f64, safetensors::File) {
    stretch_ok(&["gradients", model, "--batch", &arg(batch), "-o", &arg(out)]);
    let file = read(out);
    let loss = file.metadata["stretch.loss"].parse().expect("loss");
    (loss, file)
}

#[test]
fn gradients_are_the_slope_of_the_training_loss() {
    let dir = scratch("gradients");
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "3", "--input-size", "32", "-o", &m]);
    let torch = dir.join("torch");
    stretch_ok(&["export", &m, "--format", "torch", "-o", &arg(&torch)]);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(torch.join("stretch-torch.json")).expect("manifest")).expect("json");
    let images: Vec<f32> = (0..N * 3 * 32 * 32)
        .map(|i| ((i * 7919) % 200) as f32 / 100.0 - 1.0)
        .collect();
    let batch = dir.join("batch.safetensors");
    write_batch(&batch, Some(images), vec![0, 3, 7, 9]);
    let (loss, grads) = gradients(&m, &batch, &dir.join("g.safetensors"));
    assert!(loss.is_finite() && loss > 0.0, "loss {loss}");

    let learnable: BTreeMap<String, (String, Vec<usize>)> = manifest["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter(|k| k["role"] == "learnable")
        .map(|k| {
            let shape = k["shape"].as_array().expect("shape").iter();
            let shape = shape.map(|d| d.as_u64().expect("dim") as usize).collect();
            let init = k["initializer"].as_str().expect("initializer").to_string();
            (init, (k["key"].as_str().expect("key").to_string(), shape))
        })
        .collect();
    let names: Vec<&String> = grads.tensors.keys().collect();
    assert_eq!(
        names,
        learnable.keys().collect::<Vec<_>>(),
        "one gradient per learnable key"
    );
    for (init, g) in &grads.tensors {
        assert_eq!(g.shape, learnable[init].1, "shape of {init}");
    }

    let norm2: f64 = grads
        .tensors
        .values()
        .flat_map(f32s)
        .map(|v| f64::from(*v).powi(2))
        .sum();
    let norm = norm2.sqrt();
    assert!(norm > 1e-3, "gradient norm {norm}");
    let step = 1e-4 / norm;
    let mut moved = [0.0f64; 2];
    let weights = read(&torch.join("weights.safetensors"));
    for (side, sign) in [(0, 1.0f32), (1, -1.0f32)] {
        let mut tensors = weights.tensors.clone();
        for (init, g) in &grads.tensors {
            let key = &learnable[init].0;
            let Some(Entry { data: Data::F32(w), .. }) = tensors.get_mut(key) else {
                panic!("no float tensor {key} in weights.safetensors");
            };
            for (w, d) in w.iter_mut().zip(f32s(g)) {
                *w += sign * step as f32 * d;
            }
        }
        let w = dir.join(format!("w{side}.safetensors"));
        std::fs::write(&w, safetensors::write(&tensors, &weights.metadata)).expect("write weights");
        let t = arg(&dir.join(format!("t{side}.onnx")));
        stretch_ok(&["import-weights", &m, "--from", &arg(&w), "-o", &t]);
        moved[side] = gradients(&t, &batch, &dir.join(format!("g{side}.safetensors"))).0;
    }
    let slope = (moved[0] - moved[1]) / (2.0 * step);
    let rel = (slope - norm2).abs() / norm2;
    assert!(
        rel < 2e-3,
        "central difference {slope:.6e} along the gradient, squared norm {norm2:.6e} (relative {rel:.1e})"
    );
}

#[test]
fn bad_batches_are_refused_by_name() {
    let dir = scratch("gradients-bad");
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "3", "--input-size", "32", "-o", &m]);
    let images = || Some(vec![0.5f32; 2 * 3 * 32 * 32]);
    let mut nan = images().expect("images");
    nan[7] = f32::NAN;
    let cases: [Case; 4] = [
        (
            "nan",
            Some(nan),
            vec![1, 2],
            &["nan.safetensors", "`images` holds NaN at element 7"],
        ),
        (
            "no-images",
            None,
            vec![1, 2],
            &["no-images.safetensors", "no tensor `images`"],
        ),
        ("label", images(), vec![1, 12], &["label 12 of image 1", "10 classes"]),
        ("count", images(), vec![1, 2, 3], &["3 label(s)", "6144 image values"]),
    ];
    for (name, images, labels, want) in cases {
        let batch = dir.join(format!("{name}.safetensors"));
        write_batch(&batch, images, labels);
        let out = stretch(&[
            "gradients",
            &m,
            "--batch",
            &arg(&batch),
            "-o",
            &arg(&dir.join("g.safetensors")),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: one line expected:\n{err}");
        for w in want {
            assert!(err.contains(w), "{name}: want `{w}`:\n{err}");
        }
    }
}
