//! Every fixture, with random weights and a 32x32 input, branched on the
//! host profile (`cpu0,cpu1`, `--alpha 1` so that stages of this small input
//! branch too) in both merge modes, runs on the subgraph
//! runtime like the whole model in onnxruntime (scripts/reference_outputs.py,
//! one Python call for all models), within 1e-4 of the reference's max abs
//! value:
//! - 1 worker: both processors inline on the scheduling thread;
//! - 2 workers: `cpu0` inline, `cpu1` a pool thread (tract, the default);
//! - 3 workers: the scheduling thread plus `cpu0` on a pool thread and
//!   `cpu1` on a queue thread;
//! - 8 client threads × 50 requests, each on its own input, on the 3-worker
//!   runtime, every output checked against its own input's reference.
//!
//! Each branched model is also exported as a bundle (`stretch export`, the
//! first input as its reference input, ONNX and LiteRT files): the
//! bundle's reference output matches onnxruntime's whole-model output,
//! `stretch-run --check` passes on tract, on onnxruntime and on its
//! LiteRT files (`--format tflite`), and every
//! `.tflite` file run in LiteRT's interpreter matches its ONNX subgraph in
//! onnxruntime within 1e-5 of the largest magnitude, each subgraph and
//! the whole chain (`scripts/check_litert.py`, one Python call for all).
//!
//! And each is quantized for two int8 cores (`stretch quantize`, 8 digits
//! images): the file cuts into the same subgraphs as the fp32 one, and its
//! output on two workers is within one quantization step of onnxruntime's
//! run of the same whole file on the onnxruntime engine (the QDQ pairs
//! each subgraph keeps fuse into the same integer kernels: the same
//! library on the same CPU), and on tract within one step of ONNX's
//! reference evaluator (numpy) on the whole file as tract loads it
//! (`graph_ir::onnx::fuse_qdq`'s rewrite into onnxruntime's integer
//! arithmetic, in standard operators). onnxruntime's integer kernels
//! depend on the CPU (AVX2 without VNNI saturates int16 sums), the
//! reference evaluator's arithmetic does not, so tract is held to what the
//! rewritten file states on every CPU. Its activation scales are within 5% of onnxruntime's
//! `quantize_static` on the same images (`scripts/check_quantized.py`,
//! one Python call for all models).
//!
//! The 1-, 3-worker and client checks run every subgraph in the
//! onnxruntime engine; the 2-worker check runs twice, with onnxruntime and
//! with tract (the default engine), so tract is checked on every branched
//! fixture against onnxruntime's whole-model output.

mod common;

use common::{INT8_PAIR, check_litert, fixtures, python, repo, scratch, stretch_ok, stretch_run_ok};
use engine::Value;
use scheduler_rt::npy::{Array, random_values, read, write};
use scheduler_rt::{ProcessorConfig, Runtime, default_factory};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tract_onnx::prelude::{IntoTValue, Tensor};

const TOLERANCE: f32 = 1e-4;
const SHAPE: [usize; 4] = [1, 3, 32, 32];
const CLIENTS: usize = 8;
const REQUESTS: usize = 50;

fn input(k: usize) -> Vec<f32> {
    random_values(10_000 + k as u64, SHAPE.iter().product())
}

fn value(k: usize) -> Value {
    Tensor::from_shape(&SHAPE, &input(k)).expect("input").into_tvalue()
}

fn specs(specs: &[&str]) -> Vec<ProcessorConfig> {
    specs.iter().map(|s| s.parse().expect("spec")).collect()
}

/// Fails unless `got` equals row `k` of `reference` within the tolerance.
fn check(name: &str, what: &str, got: &Value, reference: &Array, k: usize) {
    let per: usize = reference.shape[1..].iter().product();
    let want = &reference.data[k * per..(k + 1) * per];
    assert_eq!(got.shape(), &reference.shape[1..], "{name} {what}: output shape");
    let got = got.to_plain_array_view::<f32>().expect("f32 output");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= TOLERANCE * scale,
            "{name} {what}, input {k}, element {i}: {a} vs onnxruntime {b} (scale {scale})"
        );
    }
}

fn branch(fixture: &Path, merge: &str, dir: &Path) -> PathBuf {
    let stem = fixture.file_stem().and_then(|s| s.to_str()).expect("name");
    let out = dir.join(format!("{stem}-{merge}.onnx"));
    let device = repo().join("configs/devices/host.toml");
    stretch_ok(&[
        "stretch",
        fixture.to_str().expect("utf-8 path"),
        "--device",
        device.to_str().expect("utf-8 path"),
        "--processors",
        "cpu0,cpu1",
        "--merge",
        merge,
        "--alpha",
        "1",
        "--random-weights",
        "1",
        "--input-shape",
        "1,3,32,32",
        "-o",
        out.to_str().expect("utf-8 path"),
    ]);
    out
}

/// Exports `model` with input 0 as the reference input and runs the bundle.
fn bundle(model: &Path, reference: &Array, dir: &Path) {
    let stem = model.file_stem().and_then(|s| s.to_str()).expect("name");
    let (x, out) = (dir.join(format!("{stem}-x0.npy")), dir.join(format!("{stem}-bundle")));
    write(
        &x,
        &Array {
            shape: SHAPE.to_vec(),
            data: input(0),
        },
    )
    .expect("write input 0");
    let (m, x, o) = (model.to_string_lossy(), x.to_string_lossy(), out.to_string_lossy());
    let device = repo().join("configs/devices/host.toml");
    let d = device.to_string_lossy();
    let args = [
        "export",
        &m,
        "--device",
        &d,
        "--input",
        &x,
        "--no-ort",
        "--format",
        "onnx,tflite",
        "-o",
        &o,
    ];
    stretch_ok(&args);
    let got = read(&out.join("reference-output0.npy")).expect("reference output");
    let value = Tensor::from_shape(&got.shape, &got.data).expect("tensor").into_tvalue();
    check(stem, "bundle reference", &value, reference, 0);
    for run in [["--engine", "tract"], ["--engine", "ort"], ["--format", "tflite"]] {
        let text = stretch_run_ok(&[&o, "--check", run[0], run[1]]);
        assert!(text.contains("check: output 0"), "{stem} with {run:?}: {text}");
    }
}

/// The subgraphs of `g` as (processor, meeting point, the `stage` and
/// `branch` annotations of their nodes), sorted: independent subgraphs may
/// come in another order once Q/DQ nodes are inserted.
fn cut(g: &graph_ir::Graph) -> Vec<(String, bool, Vec<String>)> {
    let mut out: Vec<(String, bool, Vec<String>)> = scheduler_rt::partition(g, "cpu0")
        .expect("partition")
        .subgraphs
        .into_iter()
        .map(|s| {
            let mut tags: Vec<String> = s
                .nodes
                .iter()
                .map(|id| {
                    let a = &g.node(*id).annotations;
                    let get = |k: &str| a.get(k).cloned().unwrap_or_default();
                    format!("{}/{}", get(graph_ir::keys::STAGE), get(graph_ir::keys::BRANCH))
                })
                .collect();
            tags.sort();
            tags.dedup();
            (s.processor, s.meeting_point, tags)
        })
        .collect();
    out.sort();
    out
}

/// Quantizes `model` for two int8 cores, checks that it cuts as the fp32
/// file, runs it on input 0 and returns the reference checks to make.
fn quantized(model: &Path, dir: &Path, pair: &Path) -> Vec<String> {
    let stem = model.file_stem().and_then(|s| s.to_str()).expect("name");
    let q = dir.join(format!("{stem}-int8.onnx"));
    let cal = dir.join(format!("{stem}-calibration"));
    let x = dir.join(format!("{stem}-x0.npy"));
    let s = |p: &Path| p.to_string_lossy().into_owned();
    stretch_ok(&[
        "quantize",
        &s(model),
        "--device",
        &s(pair),
        "--calibration",
        "digits",
        "--samples",
        "8",
        "--save-calibration",
        &s(&cal),
        "-o",
        &s(&q),
    ]);
    let fp32 = graph_ir::onnx::import_file(model, &Default::default()).expect("import fp32");
    let g = graph_ir::onnx::import_file(&q, &Default::default()).expect("import the quantized file");
    assert_eq!(cut(&g), cut(&fp32), "{stem}: the quantized file cuts differently");
    let fused = dir.join(format!("{stem}-int8-fused.onnx"));
    let bytes = std::fs::read(&q).expect("read the quantized file");
    let (rewritten, _) = graph_ir::onnx::fuse_qdq(&bytes).expect("a quantized file fuse_qdq rewrites");
    std::fs::write(&fused, rewritten).expect("write the rewritten file");
    let mut checks = Vec::new();
    let engines: [(&str, [&str; 2]); 2] = [
        ("tract", ["cpu0=inline", "cpu1=pool"]),
        ("ort", ["cpu0=inline,engine=ort", "cpu1=pool,engine=ort"]),
    ];
    for (engine, procs) in engines {
        let y = dir.join(format!("{stem}-yq-{engine}.npy"));
        let rt = Runtime::load(&g, &specs(&procs), default_factory()).expect("load");
        let out = rt.run(vec![value(0)]).expect("run");
        let v = out[0].to_plain_array_view::<f32>().expect("f32 output");
        write(
            &y,
            &Array {
                shape: v.shape().to_vec(),
                data: v.iter().copied().collect(),
            },
        )
        .expect("write the output");
        checks.push(match engine {
            "tract" => format!("reference {} {} {} --steps 1", s(&fused), s(&x), s(&y)),
            _ => format!("expect {} {} {} --steps 1", s(&q), s(&x), s(&y)),
        });
    }
    checks.push(format!(
        "scales {} {} {} --tolerance 0.05",
        s(&cal.join("fp32.onnx")),
        s(&cal.join("samples.npy")),
        s(&q)
    ));
    checks
}

fn run_all(model: &Path, reference: &Array) {
    let name = model.file_name().and_then(|s| s.to_str()).expect("name").to_string();
    let g = graph_ir::onnx::import_file(model, &Default::default()).expect("import the branched model");
    assert!(
        g.node_ids().iter().any(|id| g
            .node(*id)
            .annotations
            .get(graph_ir::keys::PROCESSOR)
            .map(String::as_str)
            == Some("cpu1")),
        "{name}: nothing placed on cpu1"
    );
    let configs = vec![
        (
            "1 worker",
            specs(&["cpu0=inline,engine=ort", "cpu1=inline,engine=ort"]),
            0..2,
        ),
        (
            "2 workers",
            specs(&["cpu0=inline,engine=ort", "cpu1=pool,engine=ort"]),
            2..4,
        ),
        ("2 workers, tract", specs(&["cpu0=inline", "cpu1=pool"]), 2..4),
    ];
    for (what, procs, inputs) in configs {
        let rt = Runtime::load(&g, &procs, default_factory()).expect("load");
        for k in inputs {
            check(&name, what, &rt.run(vec![value(k)]).expect("run")[0], reference, k);
        }
    }
    let procs = specs(&["cpu0=pool,engine=ort", "cpu1=queue,engine=ort"]);
    let rt = Arc::new(Runtime::load(&g, &procs, default_factory()).expect("load"));
    check(
        &name,
        "3 workers",
        &rt.run(vec![value(4)]).expect("run")[0],
        reference,
        4,
    );
    std::thread::scope(|s| {
        for c in 0..CLIENTS {
            let (rt, name) = (rt.clone(), name.clone());
            s.spawn(move || {
                for r in 0..REQUESTS {
                    let k = 5 + c * REQUESTS + r;
                    let out = rt.run(vec![value(k)]).expect("run");
                    check(&name, "8 clients", &out[0], reference, k);
                }
            });
        }
    });
}

#[test]
fn every_fixture_branched_runs_like_onnxruntime_on_one_two_and_three_workers_and_eight_clients() {
    let dir = scratch("fixtures-runtime");
    let jobs: Vec<(PathBuf, &str)> = fixtures()
        .into_iter()
        .flat_map(|f| [(f.clone(), "project"), (f, "concat")])
        .collect();
    let models: Vec<PathBuf> = std::thread::scope(|s| {
        let halves: Vec<_> = jobs
            .chunks(jobs.len().div_ceil(2))
            .map(|chunk| {
                let dir = &dir;
                s.spawn(move || chunk.iter().map(|(f, m)| branch(f, m, dir)).collect::<Vec<_>>())
            })
            .collect();
        halves.into_iter().flat_map(|h| h.join().expect("branching")).collect()
    });
    let k = 5 + CLIENTS * REQUESTS;
    let inputs = dir.join("inputs.npy");
    let mut shape = vec![k];
    shape.extend(SHAPE);
    write(
        &inputs,
        &Array {
            shape,
            data: (0..k).flat_map(input).collect(),
        },
    )
    .expect("write inputs");
    let out = Command::new(python())
        .arg(repo().join("scripts/reference_outputs.py"))
        .arg(&inputs)
        .arg(&dir)
        .args(&models)
        .output()
        .expect("run python (install the reference tools with scripts/setup.sh)");
    assert!(
        out.status.success(),
        "reference_outputs.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pair = dir.join("int8-pair.toml");
    std::fs::write(&pair, INT8_PAIR).expect("write the int8 profile");
    let checks: Vec<String> = std::thread::scope(|s| {
        let halves: Vec<_> = models
            .chunks(models.len().div_ceil(2))
            .map(|half| {
                let (dir, pair) = (&dir, &pair);
                s.spawn(move || {
                    let mut checks = Vec::new();
                    for m in half {
                        let stem = m.file_stem().and_then(|s| s.to_str()).expect("name");
                        let reference = read(&dir.join(format!("{stem}.npy"))).expect("reference outputs");
                        run_all(m, &reference);
                        bundle(m, &reference, dir);
                        checks.extend(quantized(m, dir, pair));
                    }
                    checks
                })
            })
            .collect();
        halves.into_iter().flat_map(|h| h.join().expect("checks")).collect()
    });
    let bundles: Vec<PathBuf> = models
        .iter()
        .map(|m| {
            dir.join(format!(
                "{}-bundle",
                m.file_stem().and_then(|s| s.to_str()).expect("name")
            ))
        })
        .collect();
    check_litert(&bundles, &[]);
    let batch = dir.join("quantized-checks.txt");
    std::fs::write(&batch, checks.join("\n")).expect("write the checks");
    let out = Command::new(python())
        .arg(repo().join("scripts/check_quantized.py"))
        .arg("batch")
        .arg(&batch)
        .output()
        .expect("run python");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "quantized fixtures differ from onnxruntime or the reference evaluator:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("batch: {n} of {n} checks passed", n = checks.len())),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
