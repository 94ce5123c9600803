//! What `stretch export` writes and leaves: a bundle whole or nothing, an
//! existing bundle replaced only with `--force` (never a directory that is
//! not a bundle), subgraph files whose tensors carry the manifest's names,
//! processors in the profile's order, and a warning where a phone's
//! processor cannot run the files' precision. Model commands that refuse
//! leave no model file behind.

mod common;

use common::{arg, repo, scratch, stretch, stretch_ok};
use std::path::Path;

fn host() -> String {
    arg(&repo().join("configs/devices/host.toml"))
}

/// resnet-mini at 32x32 branched on the host's two cores.
fn branched(dir: &Path) -> String {
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "4", "-o", &m]);
    let b = arg(&dir.join("b.onnx"));
    let p = ["--processors", "cpu0,cpu1", "--alpha", "1"];
    stretch_ok(&["stretch", &m, "--device", &host(), p[0], p[1], p[2], p[3], "-o", &b]);
    b
}

fn export(model: &str, device: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let o = arg(out);
    let mut args = vec!["export", model, "--device", device, "--no-ort", "-o", &o];
    args.extend(extra);
    stretch(&args)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Nothing named after `name` beside it but `name` itself.
fn no_leftovers(dir: &Path, name: &str) {
    for e in std::fs::read_dir(dir).unwrap() {
        let f = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!f.contains(&format!("{name}.")), "left behind: {f}");
    }
}

#[test]
fn a_bundle_is_written_whole_and_replaced_only_when_asked() {
    let dir = scratch("bundle-export-replace");
    let b = branched(&dir);
    let out = dir.join("bundle");
    assert!(export(&b, &host(), &out, &[]).status.success());
    let m = bundle::Bundle::open(&out).unwrap().manifest;
    let names: Vec<&str> = m.processors.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["cpu0", "cpu1"], "the profile's order");
    let mut g = graph_ir::onnx::import_file(&b, &Default::default()).unwrap();
    for id in g.node_ids() {
        let swapped = match g
            .node(id)
            .annotations
            .get(graph_ir::keys::PROCESSOR)
            .map(String::as_str)
        {
            Some("cpu0") => "cpu1",
            Some("cpu1") => "cpu0",
            _ => continue,
        };
        g.annotate(id, graph_ir::keys::PROCESSOR, swapped);
    }
    let swapped = dir.join("swapped.onnx");
    graph_ir::onnx::export_file(&g, &swapped).unwrap();
    let stem_on_cpu1 = dir.join("stem-on-cpu1");
    assert!(export(&arg(&swapped), &host(), &stem_on_cpu1, &[]).status.success());
    let m1 = bundle::Bundle::open(&stem_on_cpu1).unwrap().manifest;
    assert_eq!(m1.subgraphs[0].processor, "cpu1", "the stem on cpu1");
    let names: Vec<&str> = m1.processors.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["cpu0", "cpu1"], "the profile's order, not the first subgraph's");

    std::fs::write(out.join("sg99-cpu0.onnx"), b"stale").unwrap();
    let again = export(&b, &host(), &out, &[]);
    assert!(
        !again.status.success() && stderr(&again).contains("pass --force"),
        "{}",
        stderr(&again)
    );
    let forced = export(&b, &host(), &out, &["--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert!(!out.join("sg99-cpu0.onnx").exists(), "a file of the old bundle stayed");
    assert!(bundle::Bundle::open(&out).is_ok());
    no_leftovers(&dir, "bundle");

    let mine = dir.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), b"mine").unwrap();
    let refused = export(&b, &host(), &mine, &["--force"]);
    assert!(
        !refused.status.success() && stderr(&refused).contains("not a bundle"),
        "{}",
        stderr(&refused)
    );
    assert!(mine.join("notes.txt").is_file());

    // cpu0 and cpu1 are not snapdragon855's: the export fails once it has begun.
    let sd = arg(&repo().join("configs/devices/snapdragon855.toml"));
    let failed = export(&b, &sd, &dir.join("failed"), &[]);
    assert!(
        !failed.status.success() && stderr(&failed).contains("does not have"),
        "{}",
        stderr(&failed)
    );
    assert!(!dir.join("failed").exists(), "a failed export left its directory");
    no_leftovers(&dir, "failed");
}

#[test]
fn subgraph_files_name_their_tensors_as_the_manifest_does() {
    let dir = scratch("bundle-export-names");
    let b = branched(&dir);
    let out = dir.join("bundle");
    assert!(export(&b, &host(), &out, &[]).status.success());
    let m = bundle::Bundle::open(&out).unwrap().manifest;
    for s in &m.subgraphs {
        let g = graph_ir::onnx::import_file(out.join(&s.model.file), &Default::default()).unwrap();
        let inputs: Vec<&str> = g.inputs().iter().map(|id| g.node(*id).name.as_str()).collect();
        let want: Vec<&str> = s.inputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(inputs, want, "{}", s.model.file);
        let outputs: Vec<&str> = g.outputs().iter().map(|(n, _)| n.as_str()).collect();
        let want: Vec<&str> = s.outputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(outputs, want, "{}", s.model.file);
    }
}

#[test]
fn an_unquantized_bundle_for_an_int8_only_dsp_is_warned_about() {
    let dir = scratch("bundle-export-dsp");
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "5", "--input-size", "224", "-o", &m]);
    let sd = arg(&repo().join("configs/devices/snapdragon855.toml"));
    let b224 = arg(&dir.join("b224.onnx"));
    let p = ["--processors", "cpu,dsp", "--alpha", "1"];
    stretch_ok(&["stretch", &m, "--device", &sd, p[0], p[1], p[2], p[3], "-o", &b224]);
    let b = arg(&dir.join("b.onnx"));
    stretch_ok(&["convert", &b224, "--input-shape", "1,3,28,28", "-o", &b]);
    let out = export(&b, &sd, &dir.join("bundle"), &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: processor `dsp` of snapdragon855 runs int8 only, but the model computes fp32 there"),
        "{err}"
    );
    let manifest = bundle::Bundle::open(&dir.join("bundle")).unwrap().manifest;
    assert_eq!(manifest.warnings.len(), 1, "{:?}", manifest.warnings);

    let d = dir.join("bundle");
    let path = d.join("bundle.json");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"kind\": \"dsp\"", "\"kind\": \"tpu\"");
    std::fs::write(&path, text).unwrap();
    let err = match bundle::Bundle::open(&d) {
        Ok(_) => panic!("a tpu processor was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("has kind `tpu`; the kinds are cpu, gpu, dsp, npu"),
        "{err}"
    );
}

#[test]
fn a_refused_quantization_leaves_no_model_file() {
    let dir = scratch("bundle-export-refused");
    let m = arg(&dir.join("m.onnx"));
    stretch_ok(&["zoo", "resnet-mini", "--seed", "6", "-o", &m]);
    let q = dir.join("q.onnx");
    let p = ["--processors", "cpu0,cpu1", "--alpha", "1", "--calibration", "digits"];
    let out = stretch(&[
        "stretch",
        &m,
        "--device",
        &host(),
        p[0],
        p[1],
        p[2],
        p[3],
        p[4],
        p[5],
        "-o",
        &arg(&q),
    ]);
    assert!(
        !out.status.success() && stderr(&out).contains("nothing to quantize"),
        "{}",
        stderr(&out)
    );
    no_leftovers(&dir, "q");
    assert!(!q.exists());
}

/// regnet_x_1_6gf at 32x32, random weights, quantized for `device` with
/// every node on `processor`, exported into `out`; the export's output.
fn quantized_regnet(dir: &Path, device: &str, processor: &str, out: &Path) -> String {
    let regnet = arg(&repo().join("fixtures/models/regnet_x_1_6gf.onnx"));
    let q = arg(&dir.join(format!("regnet-{processor}.onnx")));
    let shape = ["--random-weights", "1", "--input-shape", "1,3,32,32"];
    let cal = ["--calibration", "digits", "--samples", "8"];
    stretch_ok(&[
        "quantize",
        &regnet,
        shape[0],
        shape[1],
        shape[2],
        shape[3],
        "--device",
        device,
        "--processor",
        processor,
        cal[0],
        cal[1],
        cal[2],
        cal[3],
        "-o",
        &q,
    ]);
    let text = stretch_ok(&[
        "export",
        &q,
        "--device",
        device,
        "--processor",
        processor,
        "--no-ort",
        "-o",
        &arg(out),
    ]);
    for engine in ["tract", "ort"] {
        let run = common::stretch_run_ok(&[&arg(out), "--check", "--engine", engine]);
        assert!(run.contains("check: output 0"), "{engine}: {run}");
    }
    text
}

/// snapdragon855's GPU computes fp16 and lacks grouped convolutions: the
/// quantized regnet's grouped convolutions (fp16 weights) are rewritten,
/// and tract and onnxruntime both compute its float16 as float32 rounded
/// after each operator, within the bundle's float16 tolerance.
#[test]
fn a_quantized_grouped_model_exports_for_the_fp16_gpu_and_runs_on_both_engines() {
    let dir = scratch("bundle-export-fp16-grouped");
    let sd = arg(&repo().join("configs/devices/snapdragon855.toml"));
    let out = dir.join("bundle");
    let text = quantized_regnet(&dir, &sd, "gpu", &out);
    assert!(
        text.contains("rewrote") && text.contains("slices and convolutions + concat"),
        "{text}"
    );
    let m = bundle::Bundle::open(&out).unwrap().manifest;
    assert_eq!(m.processors[0].precision, "fp16");
    assert_eq!(
        m.reference.rtol,
        bundle::FP16_RTOL,
        "float16 outputs are held to float16 steps"
    );
}

/// An int8 processor that lacks grouped convolutions: the rewrite slices
/// the int8 weights, their per-channel scales and zero points per group.
#[test]
fn a_quantized_grouped_model_exports_for_an_int8_processor_that_lacks_them() {
    let dir = scratch("bundle-export-int8-grouped");
    let text = std::fs::read_to_string(repo().join("configs/devices/snapdragon855.toml")).unwrap();
    let lacking = text.replacen("[processors.dsp]\n", "[processors.dsp]\nlacks = [\"GroupedConv\"]\n", 1);
    assert_ne!(lacking, text);
    let device = dir.join("dsp-lacks-grouped.toml");
    std::fs::write(&device, lacking).unwrap();
    let out = dir.join("bundle");
    let text = quantized_regnet(&dir, &arg(&device), "dsp", &out);
    assert!(text.contains("rewrote") && text.contains("on dsp as"), "{text}");
    let m = bundle::Bundle::open(&out).unwrap().manifest;
    assert_eq!(m.processors[0].precision, "int8");
}
