//! Bundles (`stretch export`, `stretch-run`): zoo models branched on the
//! host and a quantized (int8 + fp16) branched model for snapdragon855
//! export, load as the manifest (schema `stretch.bundle/2`) describes and
//! pass `stretch-run --check` on tract and onnxruntime; onnxruntime's
//! `.ort` files and required-operators list come with them, and LiteRT
//! files that match their ONNX subgraphs in LiteRT's own interpreter
//! (fp32 within 1e-5, int8 within one step, fp16 within 1/256). The branched
//! fixtures are exported and run in `fixtures_runtime.rs`. Each bad bundle
//! is one error line and a non-zero exit before anything runs. `stretch
//! predict --bundle` prices a bundle per subgraph at its precisions.

mod common;

use common::{arg, check_litert, repo, scratch, stretch_ok, stretch_run, stretch_run_ok};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn host() -> String {
    arg(&repo().join("configs/devices/host.toml"))
}

/// `name` from the zoo at 32x32, branched on the host's two cores.
fn branched(dir: &Path, name: &str) -> String {
    let m = arg(&dir.join(format!("{name}.onnx")));
    stretch_ok(&["zoo", name, "--seed", "2", "-o", &m]);
    let b = arg(&dir.join(format!("{name}-branched.onnx")));
    let d = host();
    stretch_ok(&[
        "stretch",
        &m,
        "--device",
        &d,
        "--processors",
        "cpu0,cpu1",
        "--alpha",
        "1",
        "-o",
        &b,
    ]);
    b
}

fn export(model: &str, device: &str, out: &Path, extra: &[&str]) -> bundle::Manifest {
    let o = arg(out);
    let mut args = vec!["export", model, "--device", device, "-o", &o];
    args.extend(extra);
    let text = stretch_ok(&args);
    assert!(text.contains("wrote") && text.contains("bundle.json"), "{text}");
    bundle::Bundle::open(out)
        .expect("the manifest reads back under its schema, every file of its size and hash")
        .manifest
}

fn check_both(out: &Path) {
    let o = arg(out);
    for engine in ["tract", "ort"] {
        let text = stretch_run_ok(&[&o, "--check", "--engine", engine, "--runs", "3"]);
        assert!(
            text.contains("check: output 0") && text.contains("3 runs: min"),
            "{engine}: {text}"
        );
    }
}

/// `stretch-run --format tflite --check` passes on `out`, its output
/// holding every `want`.
fn check_tflite(out: &Path, want: &[&str]) {
    let text = stretch_run_ok(&[&arg(out), "--format", "tflite", "--check"]);
    assert!(
        text.contains("engine=tflite") && text.contains("check: output 0"),
        "{text}"
    );
    for w in want {
        assert!(text.contains(w), "want `{w}`:\n{text}");
    }
}

#[test]
fn zoo_models_export_with_ort_files_and_run_on_both_engines() {
    let dir = scratch("bundle-zoo");
    for name in ["resnet-mini", "mbnet-mini"] {
        let b = branched(&dir, name);
        let out = dir.join(format!("{name}-bundle"));
        let norm: &[&str] = if name == "mbnet-mini" {
            &["--mean", "0.5,0.25,0.125", "--std", "0.2,0.3,0.4"]
        } else {
            &[]
        };
        let mut extra = norm.to_vec();
        extra.extend(["--format", "onnx,tflite"]);
        let m = export(&b, &host(), &out, &extra);
        let want = (name == "mbnet-mini").then(|| bundle::Normalisation {
            mean: vec![0.5, 0.25, 0.125],
            std: vec![0.2, 0.3, 0.4],
        });
        assert_eq!(m.normalisation, want, "{name}");
        assert!(m.subgraphs.len() > 2, "{name}: {} subgraphs", m.subgraphs.len());
        assert!(m.subgraphs.iter().any(|s| s.processor == "cpu1" && !s.after.is_empty()));
        assert!(m.subgraphs.iter().any(|s| s.meeting_point), "{name}: no meeting point");
        for s in &m.subgraphs {
            let ort = s.ort_model.as_ref().expect(".ort file");
            assert!(out.join(&ort.file).is_file(), "{}", ort.file);
        }
        let ops = std::fs::read_to_string(out.join(&m.required_operators.file)).unwrap();
        assert!(
            ops.lines().any(|l| l.starts_with("ai.onnx;") && l.contains("Conv")),
            "{ops}"
        );
        let tmp = std::env::temp_dir().display().to_string();
        assert!(
            !ops.contains(&tmp) && !ops.contains(".partial"),
            "the operator list names a path of this machine:\n{ops}"
        );
        assert_eq!(m.processors[0].execution_provider, "XnnpackExecutionProvider");
        let xnnpack = m.processors[0].litert.as_ref().expect("a LiteRT delegate");
        assert_eq!(xnnpack.delegate, "xnnpack");
        assert!(
            m.subgraphs.iter().all(|s| s.tflite_model.is_some()),
            "{name}: a .tflite per subgraph"
        );
        check_both(&out);
        check_tflite(&out, &[]);
        check_litert(&[out], &[]);
    }
}

#[test]
fn a_quantized_branched_model_exports_at_its_precisions_and_runs_within_a_step() {
    let dir = scratch("bundle-int8");
    let sd = arg(&repo().join("configs/devices/snapdragon855.toml"));
    let m224 = arg(&dir.join("m224.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "3", "--input-size", "224", "-o", &m224]);
    let b224 = arg(&dir.join("b224.onnx"));
    let args = [
        "stretch",
        &m224,
        "--device",
        &sd,
        "--processors",
        "cpu,gpu,dsp",
        "--alpha",
        "1",
        "-o",
        &b224,
    ];
    stretch_ok(&args);
    let b = arg(&dir.join("b28.onnx"));
    stretch_ok(&["convert", &b224, "--input-shape", "1,3,28,28", "-o", &b]);
    let q = arg(&dir.join("q.onnx"));
    let args = [
        "quantize",
        &b,
        "--device",
        &sd,
        "--calibration",
        "digits",
        "--samples",
        "16",
        "-o",
        &q,
    ];
    stretch_ok(&args);
    let out = dir.join("bundle");
    let m = export(&q, &sd, &out, &["--no-ort", "--format", "onnx,tflite"]);
    let precision = |p: &str| m.processors.iter().find(|x| x.name == p).unwrap().precision.clone();
    assert_eq!(
        (precision("cpu"), precision("gpu"), precision("dsp")),
        ("int8".into(), "fp16".into(), "int8".into())
    );
    let dsp = m.processors.iter().find(|x| x.name == "dsp").unwrap();
    assert_eq!(dsp.execution_provider, "QNNExecutionProvider");
    let delegate = |p: &str| {
        m.processors
            .iter()
            .find(|x| x.name == p)
            .unwrap()
            .litert
            .clone()
            .unwrap()
    };
    assert_eq!(delegate("dsp").delegate, "qnn");
    let gpu = delegate("gpu");
    assert_eq!(gpu.delegate, "gpu");
    assert!(
        gpu.options
            .contains(&("inference_priority1".into(), "MIN_LATENCY".into())),
        "an fp16 GPU may compute in fp16: {gpu:?}"
    );
    let report = check_litert(std::slice::from_ref(&out), &[]);
    assert!(report.contains("int8") && report.contains("fp16"), "{report}");
    assert!(m.reference.atol > 0.0 || m.reference.rtol > 0.0);
    check_both(&out);
    check_tflite(&out, &["precision=int8", "precision=fp16"]);
    let predicted = stretch_ok(&["predict", "--bundle", &arg(&out), "--device", &sd]);
    let rows = predicted.lines().filter(|l| l.starts_with("sg")).count();
    assert_eq!(rows, m.subgraphs.len(), "{predicted}");
    assert!(
        predicted
            .lines()
            .any(|l| l.starts_with("sg") && l.contains(" dsp ") && l.contains(" int8 ")),
        "{predicted}"
    );
    assert!(predicted.contains("predicted makespan of"), "{predicted}");
    assert!(
        predicted
            .lines()
            .filter(|l| l.starts_with("sg"))
            .all(|l| l.contains("analytic roofline (") || l.contains("regressor ")),
        "every row names what priced it:\n{predicted}"
    );
    let lite = stretch_ok(&["predict", "--bundle", &arg(&out), "--device", &sd, "--format", "tflite"]);
    let rows = lite.lines().filter(|l| l.starts_with("sg")).count();
    assert_eq!(rows, m.subgraphs.len(), "{lite}");
    assert!(lite.contains("priced as exported to LiteRT"), "{lite}");
    assert_ne!(
        lite.lines().last(),
        predicted.lines().last(),
        "the .tflite files are priced, not the ONNX ones"
    );
    let json = stretch_ok(&["predict", "--bundle", &arg(&out), "--device", &sd, "--json"]);
    let doc: Value = serde_json::from_str(&json).expect("--json prints JSON");
    assert_eq!(doc["schema"], "stretch.predict-bundle/1");
    assert_eq!(doc["figures"], "predicted");
    let subgraphs = doc["subgraphs"].as_array().unwrap();
    assert_eq!(subgraphs.len(), m.subgraphs.len());
    assert!(
        subgraphs
            .iter()
            .all(|s| !s["priced_by"].as_object().unwrap().is_empty())
    );
}

#[test]
fn input_normalisation_comes_from_training_or_the_options_and_must_fit_the_channels() {
    let dir = scratch("bundle-norm");
    let b = branched(&dir, "resnet-mini");
    let mut g = graph_ir::onnx::import_file(Path::new(&b), &Default::default()).unwrap();
    g.set_input_normalisation(&[0.25, 0.5, 0.75], &[1.0, 2.0, 4.0]);
    let trained = dir.join("trained.onnx");
    graph_ir::onnx::export_file(&g, &trained).unwrap();
    let m = export(&arg(&trained), &host(), &dir.join("b1"), &["--no-ort"]);
    let n = m.normalisation.expect("normalisation from the model's metadata");
    assert_eq!((n.mean, n.std), (vec![0.25, 0.5, 0.75], vec![1.0, 2.0, 4.0]));
    for (mean, std, want) in [
        (
            "0.5",
            "0.2",
            "has 1 mean and 1 std values; the model's input has 3 channels",
        ),
        ("0.5,0.5,0.5", "0.2,0,0.2", "0 is not a usable value"),
    ] {
        let o = arg(&dir.join("b2"));
        let out = common::stretch(&[
            "export",
            &b,
            "--device",
            &host(),
            "--mean",
            mean,
            "--std",
            std,
            "-o",
            &o,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{err}");
    }
}

fn fails(args: &[&str], want: &str) {
    let out = stretch_run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "stretch-run {args:?} succeeded");
    assert_eq!(err.lines().count(), 1, "one line expected:\n{err}");
    assert!(
        err.starts_with("error: ") && err.contains(want),
        "want `{want}`:\n{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ran "), "something ran");
}

fn copy(from: &Path, to: &Path) -> PathBuf {
    common::copy_files(from, to)
}

fn edit(dir: &Path, f: impl FnOnce(&mut Value)) {
    common::edit_manifest(dir, f)
}

#[test]
fn bad_bundles_are_refused_with_one_line() {
    let dir = scratch("bundle-bad");
    let b = branched(&dir, "resnet-mini");
    let good = dir.join("good");
    let m = export(&b, &host(), &good, &["--no-ort"]);
    let second = m.subgraphs[1].model.file.clone();

    let d = copy(&good, &dir.join("missing"));
    std::fs::remove_file(d.join(&second)).unwrap();
    fails(&[&arg(&d)], &format!("cannot read {}", d.join(&second).display()));

    let d = copy(&good, &dir.join("altered"));
    let mut bytes = std::fs::read(d.join(&second)).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(d.join(&second), bytes).unwrap();
    fails(&[&arg(&d)], "the file was altered or replaced");

    let d = copy(&good, &dir.join("newer"));
    edit(&d, |v| v["schema"] = "stretch.bundle/3".into());
    fails(
        &[&arg(&d)],
        "schema `stretch.bundle/3`; this build reads `stretch.bundle/2` (not a stretch bundle, or a newer",
    );
    edit(&d, |v| v["schema"] = "stretch.bundle/1".into());
    fails(&[&arg(&d)], "(an older stretch wrote it: export the model again)");

    let lite = dir.join("lite");
    export(&b, &host(), &lite, &["--no-ort", "--format", "onnx,tflite"]);
    let d = copy(&lite, &dir.join("lite-layout"));
    edit(&d, |v| {
        v["subgraphs"][0]["tflite_model"]["inputs"][0]["layout"] = "nchw".into()
    });
    fails(
        &[&arg(&d)],
        "LiteRT tensor `input` has layout `nchw`; the layouts are nhwc, onnx",
    );
    let d = copy(&lite, &dir.join("lite-scale"));
    edit(&d, |v| {
        let t = &mut v["subgraphs"][0]["tflite_model"]["outputs"][0];
        t["dtype"] = "i8".into();
        t["quantization"] = serde_json::json!({"scale": 0.0, "zero_point": 0});
    });
    fails(
        &[&arg(&d)],
        "is i8 with scale 0 and zero point 0; LiteRT takes a positive finite scale",
    );
    let d = copy(&lite, &dir.join("lite-names"));
    edit(&d, |v| {
        v["subgraphs"][1]["tflite_model"]["outputs"][0]["name"] = "other".into()
    });
    fails(&[&arg(&d)], "LiteRT file lists tensors other; the subgraph's are");

    let d = copy(&good, &dir.join("unconnected"));
    edit(&d, |v| v["subgraphs"][1]["inputs"][0]["name"] = "nowhere".into());
    fails(
        &[&arg(&d)],
        "reads tensor `nowhere`, which no model input or earlier subgraph produces",
    );

    fails(&[&arg(&good), "--processor", "cpu1=pool:97"], "97");
    fails(
        &[&arg(&good), "--processor", "gpu=pool:0"],
        "the bundle has no processor `gpu`",
    );

    let d = copy(&good, &dir.join("shape"));
    let r = m.reference.outputs[0].file.clone();
    let mut a = scheduler_rt::npy::read(&d.join(&r)).unwrap();
    a.shape = vec![a.data.len()];
    scheduler_rt::npy::write(&d.join(&r), &a).unwrap();
    let f = bundle::FileRef::of(&d, &r).unwrap();
    edit(&d, |v| v["reference"]["outputs"][0] = serde_json::to_value(f).unwrap());
    fails(&[&arg(&d), "--check"], "reference output 0 has shape");
}

/// regnet_x_1_6gf at 32x32, random weights, all of it on snapdragon855's
/// `processor`, exported into `out`; the command's output.
fn regnet_on(processor: &str, out: &Path) -> String {
    let regnet = arg(&repo().join("fixtures/models/regnet_x_1_6gf.onnx"));
    let sd = arg(&repo().join("configs/devices/snapdragon855.toml"));
    let o = arg(out);
    stretch_ok(&[
        "export",
        &regnet,
        "--random-weights",
        "1",
        "--input-shape",
        "1,3,32,32",
        "--device",
        &sd,
        "--processor",
        processor,
        "--no-ort",
        "--format",
        "onnx,tflite",
        "-o",
        &o,
    ])
}

fn grouped_convs(g: &graph_ir::Graph) -> usize {
    g.node_ids()
        .into_iter()
        .filter(|id| matches!(&g.node(*id).op, graph_ir::Op::Conv(c) if c.group > 1))
        .count()
}

#[test]
fn grouped_convolutions_are_rewritten_for_a_gpu_that_lacks_them_and_still_match() {
    let dir = scratch("bundle-grouped");
    let out = dir.join("bundle");
    let text = regnet_on("gpu", &out);
    let m = bundle::Manifest::load(&out).unwrap();
    let original =
        graph_ir::onnx::import_file(repo().join("fixtures/models/regnet_x_1_6gf.onnx"), &Default::default()).unwrap();
    let grouped = grouped_convs(&original);
    assert!(grouped > 10, "regnet has {grouped} grouped convolutions");
    assert_eq!(m.rewrites.len(), grouped, "{text}");
    assert!(text.contains("slices and convolutions + concat"), "{text}");
    for s in &m.subgraphs {
        let g = graph_ir::onnx::import_file(out.join(&s.model.file), &Default::default()).unwrap();
        assert_eq!(
            grouped_convs(&g),
            0,
            "{} still holds a grouped convolution",
            s.model.file
        );
    }
    check_both(&out);
    check_litert(std::slice::from_ref(&out), &[]);
    check_tflite(&out, &[]);
    let cpu = dir.join("cpu");
    assert!(
        !regnet_on("cpu", &cpu).contains("rewrote"),
        "the CPU has grouped convolutions"
    );
    check_litert(std::slice::from_ref(&cpu), &[]);
    check_tflite(&cpu, &[]);
}
