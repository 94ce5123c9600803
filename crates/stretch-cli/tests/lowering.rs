//! Burn inference through the training lowering matches onnxruntime on every
//! fixture (random weights, 64x64 input), on branched versions of them in
//! both merge modes, and on the zoo models: max abs difference within 1e-4 of
//! the output's scale (`check_onnx.py expect-list`).

mod common;

use common::*;
use graph_ir::onnx::{ImportOptions, import_file};
use scheduler_rt::npy::{Array, write};
use training::{Backend, Inference};

fn path(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn burn_inference_matches_onnxruntime() {
    let dir = scratch("lowering");
    let host = path(&repo().join("configs/devices/host.toml"));
    let mut models = Vec::new();
    for f in fixtures() {
        let out = dir.join(f.file_name().expect("name"));
        stretch_ok(&[
            "convert",
            &path(&f),
            "--input-shape",
            "1,3,64,64",
            "--random-weights",
            "1",
            "-o",
            &path(&out),
        ]);
        models.push((out, false));
    }
    for f in fixtures().iter().filter(|f| path(f).ends_with("_bn.onnx")) {
        let stem = f.file_stem().expect("stem").to_string_lossy().into_owned();
        for merge in ["project", "concat"] {
            let out = dir.join(format!("{stem}-{merge}.onnx"));
            stretch_ok(&[
                "stretch",
                &path(f),
                "--input-shape",
                "1,3,64,64",
                "--random-weights",
                "2",
                "--device",
                &host,
                "--alpha",
                "1",
                "--merge",
                merge,
                "-o",
                &path(&out),
            ]);
            models.push((out, true));
        }
    }
    for name in ["resnet-mini", "mbnet-mini"] {
        let m = dir.join(format!("{name}.onnx"));
        stretch_ok(&["zoo", name, "--seed", "4", "-o", &path(&m)]);
        models.push((m.clone(), false));
        for merge in ["project", "concat"] {
            let b = dir.join(format!("{name}-{merge}.onnx"));
            stretch_ok(&[
                "stretch",
                &path(&m),
                "--device",
                &host,
                "--alpha",
                "1",
                "--merge",
                merge,
                "-o",
                &path(&b),
            ]);
            models.push((b, true));
        }
    }
    let device = Backend::Flex.device();
    let mut list = String::new();
    for (i, (model, branched)) in models.iter().enumerate() {
        let g = import_file(model, &ImportOptions::default()).expect("import");
        if *branched {
            let branches = g
                .node_ids()
                .into_iter()
                .filter(|&id| g.node(id).annotations.contains_key(graph_ir::keys::BRANCH))
                .count();
            assert!(branches > 0, "{}: nothing was branched", model.display());
        }
        let inf = Inference::new(&g, &device).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
        let [c, h, w] = inf.program.input_shape();
        let n = 1;
        let data: Vec<f32> = (0..n * c * h * w)
            .map(|k| ((k * 7919 + i * 31) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let scores = inf.scores(&data, n);
        let (x, y) = (dir.join(format!("x{i}.npy")), dir.join(format!("y{i}.npy")));
        write(
            &x,
            &Array {
                shape: vec![n, c, h, w],
                data,
            },
        )
        .expect("write input");
        let classes = inf.program.classes();
        write(
            &y,
            &Array {
                shape: vec![n, classes],
                data: scores,
            },
        )
        .expect("write output");
        list.push_str(&format!("{} {} {}\n", path(model), path(&x), path(&y)));
    }
    let list_file = dir.join("list.txt");
    std::fs::write(&list_file, list).expect("write list");
    let report = reference(&["expect-list", &path(&list_file), "--rtol", "1e-4"]);
    assert_eq!(
        report.lines().filter(|l| l.contains("max abs diff")).count(),
        models.len(),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
