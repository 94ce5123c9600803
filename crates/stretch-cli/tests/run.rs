//! `stretch run` on annotated branched models, checked against onnxruntime.

mod common;

use common::{arg, reference, repo, scratch, stretch, stretch_ok};
use scheduler_rt::npy::{Array, write};
use scheduler_rt::testing::{INPUT, three_branch, two_branch};
use std::path::PathBuf;

fn model(dir: &std::path::Path, three: bool) -> PathBuf {
    let g = if three { three_branch(8) } else { two_branch(8, 1) }.unwrap();
    let path = dir.join("branched.onnx");
    graph_ir::onnx::export_file(&g, &path).unwrap();
    path
}

fn input(dir: &std::path::Path, seed: u32) -> PathBuf {
    let n: usize = INPUT.iter().product();
    let data = (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let path = dir.join(format!("in{seed}.npy"));
    write(
        &path,
        &Array {
            shape: INPUT.to_vec(),
            data,
        },
    )
    .unwrap();
    path
}

#[test]
fn branched_runs_match_onnxruntime_with_one_two_and_three_workers() {
    let dir = scratch("run-ort");
    for (three, specs) in [
        (false, vec!["cpu0=inline", "cpu1=pool"]),
        (false, vec!["cpu1=pool", "cpu0=pool"]),
        (true, vec!["cpu0=inline", "cpu1=pool", "cpu2=pool"]),
    ] {
        let m = model(&dir, three);
        let x = input(&dir, specs.len() as u32);
        let y = dir.join("out.npy");
        let (m_s, x_s, y_s) = (m.to_str().unwrap(), x.to_str().unwrap(), y.to_str().unwrap());
        let mut args = vec!["run", m_s, "--input", x_s, "--output", y_s];
        for s in &specs {
            args.extend(["--processor", s]);
        }
        let out = stretch_ok(&args);
        assert!(out.contains("output 0   shape [1, 10]"), "{out}");
        reference(&["expect", m_s, x_s, y_s, "--rtol", "1e-4"]);
    }
    let m = model(&dir, false);
    let one = dir.join("one.npy");
    let x = input(&dir, 9);
    let out = stretch_ok(&[
        "run",
        m.to_str().unwrap(),
        "--input",
        x.to_str().unwrap(),
        "--output",
        one.to_str().unwrap(),
        "--processor",
        "cpu0=inline",
        "--processor",
        "cpu1=inline",
    ]);
    assert!(out.contains("subgraphs  4"), "{out}");
    reference(&[
        "expect",
        m.to_str().unwrap(),
        x.to_str().unwrap(),
        one.to_str().unwrap(),
    ]);
}

#[test]
fn a_runtime_config_file_sets_processors_and_flags_override_it() {
    let dir = scratch("run-config");
    let m = model(&dir, true);
    let x = input(&dir, 4);
    let y = dir.join("out.npy");
    let host = common::repo().join("configs/runtime/host.toml");
    let (m_s, x_s, y_s, host_s) = (
        m.to_str().unwrap(),
        x.to_str().unwrap(),
        y.to_str().unwrap(),
        host.to_str().unwrap(),
    );
    let out = stretch_ok(&[
        "run",
        m_s,
        "--input",
        x_s,
        "--output",
        y_s,
        "--runtime-config",
        host_s,
        "--processor",
        "cpu1=queue",
        "--processor",
        "cpu2=pool,engine=ort",
    ]);
    assert!(
        out.contains("cpu0=tract") && out.contains("cpu1=tract") && out.contains("cpu2=ort"),
        "{out}"
    );
    reference(&["expect", m_s, x_s, y_s, "--rtol", "1e-4"]);
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[[processor]]\nname = \"cpu0\"\nkind = \"inline\"\nthreads = -1\n",
    )
    .unwrap();
    let out = stretch(&["run", m_s, "--random", "1", "--runtime-config", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("bad.toml") && err.contains("line 4"),
        "{err}"
    );
    std::fs::write(&bad, "[[processor]]\nname = \"cpu0\"\nkind = \"gpu\"\n").unwrap();
    let out = stretch(&["run", m_s, "--random", "1", "--runtime-config", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml: processor[0].kind: unknown worker kind 'gpu'"),
        "{err}"
    );
}

#[test]
fn bad_inputs_and_processors_are_named() {
    let dir = scratch("run-bad");
    let m = model(&dir, false);
    let m_s = m.to_str().unwrap();
    let wrong = dir.join("wrong.npy");
    write(
        &wrong,
        &Array {
            shape: vec![1, 3, 8, 8],
            data: vec![0.0; 192],
        },
    )
    .unwrap();
    let structure_only = common::repo().join("fixtures/models/resnet18.onnx");
    let structure_only = structure_only.to_str().unwrap();
    let f64_file = dir.join("f64.npy");
    let mut bytes = scheduler_rt::npy::to_bytes(&Array {
        shape: vec![2],
        data: vec![0.0; 2],
    });
    let at = bytes.windows(3).position(|w| w == b"<f4").unwrap();
    bytes[at..at + 3].copy_from_slice(b"<f8");
    std::fs::write(&f64_file, bytes).unwrap();
    for (args, expected) in [
        (
            vec!["run", m_s, "--input", wrong.to_str().unwrap()],
            vec!["expected shape [1, 3, 32, 32]", "got [1, 3, 8, 8]"],
        ),
        (
            vec!["run", m_s, "--input", f64_file.to_str().unwrap()],
            vec!["f64.npy", "'<f8'"],
        ),
        (
            vec!["run", m_s, "--random", "1", "--processor", "cpu0=inline"],
            vec!["'cpu1'", "configured: cpu0"],
        ),
        (
            vec![
                "run",
                m_s,
                "--random",
                "1",
                "--processor",
                "cpu0=inline",
                "--processor",
                "cpu1=pool:core999",
            ],
            vec!["cpu1", "999"],
        ),
        (
            vec!["run", m_s, "--random", "1", "--processor", "cpu0=gpu"],
            vec!["unknown worker kind 'gpu'"],
        ),
        (
            vec!["run", structure_only, "--random", "1"],
            vec!["resnet18.onnx: 42 weights have no data", "--random-weights SEED"],
        ),
        (
            vec!["bench", structure_only, "--original", structure_only, "--runs", "1"],
            vec!["resnet18.onnx: 42 weights have no data", "--random-weights SEED"],
        ),
    ] {
        let out = stretch(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        for e in expected {
            assert!(err.contains(e), "{args:?}: '{e}' not in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// An engine that panics on a model (tract on negative Pad pads) gives one
/// `error:` line, on an inline and on a pool worker, with or without
/// RUST_BACKTRACE; the panic's own report and backtrace stay off stderr.
#[test]
fn an_engine_panic_is_one_error_line() {
    let model = common::repo().join("fixtures/ops/pad_negative_opset13.onnx");
    let model = model.to_string_lossy();
    for (worker, backtrace) in [("cpu0=inline", "1"), ("cpu0=pool", "0")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stretch"))
            .args(["run", &model, "--random", "1", "--processor", worker])
            .env("RUST_BACKTRACE", backtrace)
            .output()
            .expect("run stretch");
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{worker}: {e}");
        assert!(e.starts_with("error: ") && e.lines().count() == 1, "{worker}: {e}");
        assert!(e.contains("pad_negative_opset13.onnx"), "{worker}: {e}");
        for noise in ["panicked at", "backtrace", "RUST_BACKTRACE"] {
            assert!(!e.contains(noise), "{worker}: {e}");
        }
    }
}

/// Runs `stretch` with its standard output closed by the reader at once
/// (`stretch ... | head -0`): it must still do its work and write its files.
fn with_closed_stdout(args: &[&str]) -> std::process::ExitStatus {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_stretch"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run stretch");
    drop(child.stdout.take());
    child.wait().expect("wait for stretch")
}

#[test]
fn a_closed_stdout_never_loses_an_output_file() {
    let dir = scratch("closed-stdout");
    let g = scheduler_rt::testing::two_branch(8, 1).unwrap();
    let model = dir.join("m.onnx");
    graph_ir::onnx::export_file(&g, &model).unwrap();
    let out = dir.join("o.npy");
    let status = with_closed_stdout(&["run", &arg(&model), "--random", "1", "--output", &arg(&out)]);
    assert!(status.success(), "{status}");
    assert!(out.exists(), "run wrote no {}", out.display());
    let zoo = dir.join("zoo.onnx");
    stretch_ok(&["zoo", "resnet-mini", "--input-size", "32", "-o", &arg(&zoo)]);
    let plan = dir.join("p.json");
    let device = arg(&repo().join("configs/devices/snapdragon855.toml"));
    let status = with_closed_stdout(&["plan", &arg(&zoo), "--device", &device, "--explain", "-o", &arg(&plan)]);
    assert!(status.success(), "{status}");
    assert!(plan.exists(), "plan wrote no {}", plan.display());
}

/// A model whose input alone needs more memory than any machine has is
/// refused before anything is allocated, naming the value and its size
/// (it was a failed 43 GB allocation and a backtrace).
#[test]
fn a_value_larger_than_memory_is_refused_by_name() {
    use graph_ir::ops::{Unary, UnaryOp};
    let dir = scratch("run-huge");
    let mut g = graph_ir::Graph::new("huge");
    let x = g.add_input("x", graph_ir::Fact::f32([1, 64, 60000, 60000])).unwrap();
    let y = g
        .add_node("relu", graph_ir::Op::Unary(Unary { op: UnaryOp::Relu }), &[x])
        .unwrap();
    g.set_outputs(vec![("y".into(), y.out(0))]).unwrap();
    let model = dir.join("huge.onnx");
    graph_ir::onnx::export_file(&g, &model).unwrap();
    let out = stretch(&["run", &arg(&model), "--random", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.lines().count() == 1 && err.contains("value `x` is f32[1x64x60000x60000], 921.600 GB"),
        "{err}"
    );
}
