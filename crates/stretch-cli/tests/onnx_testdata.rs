//! `stretch convert` on model files no one here wrote: every case of the
//! ONNX package's own `pytorch-converted` and `pytorch-operator` backend
//! test data (in the `.venv` that `scripts/setup.sh` installs). A case
//! either converts, and the converted file reproduces the case's stored
//! outputs in onnxruntime (rtol 1e-3, atol 1e-4, every value), or is
//! refused with one clear error line naming what is unsupported; nothing
//! panics. Only 3-D convolution and pooling may be refused (1-D windows
//! run as 2-D ones over a height of 1). The count that converts may only
//! grow ([`MIN_CONVERTED`]).

mod common;

use common::{python, reference, repo, scratch, stretch, stretch_ok};
use std::path::PathBuf;

/// Cases that convert and match today; raise it when more do.
const MIN_CONVERTED: usize = 104;

/// The backend test data folder of the `onnx` package that the reference
/// Python (`.venv`, from `scripts/setup.sh`) imports.
fn test_data() -> PathBuf {
    let out = std::process::Command::new(python())
        .args(["-c", "import onnx, os; print(os.path.dirname(onnx.__file__))"])
        .output()
        .expect("run python (install the reference tools with scripts/setup.sh)");
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("backend/test/data");
    assert!(
        out.status.success() && dir.is_dir(),
        "no onnx backend test data from {} ({}): run scripts/setup.sh",
        python().display(),
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[test]
fn onnx_backend_test_cases_convert_and_match_or_are_refused_clearly() {
    let data = test_data();
    let out = scratch("onnx-testdata");
    let mut cases: Vec<PathBuf> = ["pytorch-converted", "pytorch-operator"]
        .iter()
        .flat_map(|kind| std::fs::read_dir(data.join(kind)).expect("read test data").flatten())
        .map(|e| e.path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 100,
        "only {} cases under {}",
        cases.len(),
        data.display()
    );
    let mut converted = Vec::new();
    let mut refused = Vec::new();
    let mut panics = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let model = case.join("model.onnx");
        let dst = out.join(format!("{name}.onnx"));
        let run = stretch(&["convert", model.to_str().unwrap(), "-o", dst.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        if err.contains("panicked") || run.status.code().is_none_or(|c| c > 1) {
            panics.push(format!("{name}: {err}"));
        } else if run.status.success() {
            converted.push(format!("{} {}", dst.display(), case.display()));
        } else {
            let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
            assert_eq!(lines.len(), 1, "{name}: not one error line:\n{err}");
            refused.push(format!("{name}: {}", lines[0]));
        }
    }
    eprintln!(
        "{} cases: {} converted, {} refused, {} panicked",
        cases.len(),
        converted.len(),
        refused.len(),
        panics.len()
    );
    for r in &refused {
        eprintln!("  refused {r}");
    }
    assert!(panics.is_empty(), "panics:\n{}", panics.join("\n"));
    let not_3d: Vec<&String> = refused.iter().filter(|r| !r.contains("makes it 3-D")).collect();
    assert!(
        not_3d.is_empty(),
        "refused, though not a 3-D window:\n{}",
        not_3d.iter().map(|r| r.as_str()).collect::<Vec<_>>().join("\n")
    );
    let list = out.join("converted.txt");
    std::fs::write(&list, converted.join("\n")).unwrap();
    reference(&["testdata-list", list.to_str().unwrap()]);
    assert!(
        converted.len() >= MIN_CONVERTED,
        "{} cases convert and match, fewer than the {MIN_CONVERTED} that did",
        converted.len()
    );
}

/// The nine `light` model-zoo networks of the onnx package's test data.
fn light_models() -> Vec<PathBuf> {
    let light = test_data().join("light");
    let mut models: Vec<PathBuf> = std::fs::read_dir(&light)
        .expect("read light models")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    models.sort();
    assert_eq!(models.len(), 9, "{}", light.display());
    models
}

/// The package's nine `light` model-zoo networks import and report their
/// costs, and ShuffleNet, whose channel-shuffle reshapes name the channel
/// count, plans: widths that the reshapes cannot take are left out, a
/// stage none of whose branches builds stays whole with the reason.
#[test]
fn light_model_zoo_networks_import_and_shufflenet_plans() {
    let light = test_data().join("light");
    let models = light_models();
    for m in &models {
        let out = stretch_ok(&["inspect", m.to_str().unwrap(), "--json"]);
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(doc["total"]["macs"].as_u64().unwrap() > 100_000_000, "{}", m.display());
        for st in doc["stages"].as_array().expect("stages") {
            assert!(st["macs"].as_u64().unwrap() > 0, "{}: an empty stage {st}", m.display());
        }
        assert!(
            doc["head"]["mac_share"].as_f64().unwrap() < 0.3,
            "{}: {doc}",
            m.display()
        );
    }
    let shufflenet = light.join("light_shufflenet.onnx");
    let host = repo().join("configs/devices/host.toml");
    let dir = scratch("light-plan");
    let written = dir.join("plan.json");
    stretch_ok(&[
        "plan",
        shufflenet.to_str().unwrap(),
        "--device",
        host.to_str().unwrap(),
        "-o",
        written.to_str().unwrap(),
    ]);
    let plan: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    assert_eq!(plan["stages"].as_array().unwrap().len(), 3, "{plan}");
}

/// The nine `light` networks: `convert` output equals the original in
/// onnxruntime (within 1e-4 of the output's scale). As shipped, their
/// weights are built by `ConstantOfShape` and give every class the same
/// score for any input, so the converted file's weights (folded to
/// initializers) are redrawn, and that file converts equal to itself,
/// plans and branches on host.toml, and its branched file runs on the
/// subgraph runtime with an output equal to onnxruntime's run of that
/// file, an output that is not uniform.
#[test]
fn light_model_zoo_networks_convert_branch_and_run_like_onnxruntime() {
    let dir = scratch("light-zoo");
    let host = repo().join("configs/devices/host.toml");
    let models = light_models();
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let x = dir.join("x.npy");
    let data = (0..3 * 224 * 224)
        .map(|k| ((k * 7919) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    let input = scheduler_rt::npy::Array {
        shape: vec![1, 3, 224, 224],
        data,
    };
    scheduler_rt::npy::write(&x, &input).unwrap();
    let mut branched_stages = 0;
    for m in &models {
        let name = m.file_stem().unwrap().to_string_lossy().into_owned();
        let folded = dir.join(format!("{name}.folded.onnx"));
        stretch_ok(&["convert", &s(m), "-o", &s(&folded)]);
        reference(&["compare", &s(m), &s(&folded), "--rtol", "1e-4"]);
        let filled = dir.join(format!("{name}.onnx"));
        reference(&["fill", &s(&folded), &s(&filled), "--seed", "1", "--refill"]);
        std::fs::remove_file(&folded).ok();
        let converted = dir.join(format!("{name}.converted.onnx"));
        stretch_ok(&["convert", &s(&filled), "-o", &s(&converted)]);
        reference(&["compare", &s(&filled), &s(&converted), "--rtol", "1e-4"]);
        std::fs::remove_file(&converted).ok();
        let branched = dir.join(format!("{name}.branched.onnx"));
        let plan = stretch_ok(&["stretch", &s(&filled), "--device", &s(&host), "-o", &s(&branched)]);
        branched_stages += plan
            .lines()
            .find(|l| l.starts_with("wrote"))
            .and_then(|l| l.split(": ").nth(1))
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or_else(|| panic!("{name}: no `wrote` line in\n{plan}"));
        std::fs::remove_file(&filled).ok();
        let y = dir.join("y.npy");
        stretch_ok(&["run", &s(&branched), "--input", &s(&x), "--output", &s(&y)]);
        let report = reference(&["expect", &s(&branched), &s(&x), &s(&y), "--rtol", "1e-4"]);
        let scale: f64 = report
            .split("reference scale ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no scale in {report}"));
        assert!(
            scale > 1.05e-3,
            "{name}: the output is uniform over the 1000 classes ({report}), so comparing it shows nothing"
        );
        std::fs::remove_file(&branched).ok();
    }
    assert!(
        branched_stages >= 9,
        "only {branched_stages} stages branched across the nine networks"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
