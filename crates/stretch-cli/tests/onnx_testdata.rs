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

/// The package's nine `light` model-zoo networks import and report their
/// costs, and ShuffleNet, whose channel-shuffle reshapes name the channel
/// count, plans: widths that the reshapes cannot take are left out, a
/// stage none of whose branches builds stays whole with the reason.
#[test]
fn light_model_zoo_networks_import_and_shufflenet_plans() {
    let light = test_data().join("light");
    let mut models: Vec<PathBuf> = std::fs::read_dir(&light)
        .expect("read light models")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    models.sort();
    assert_eq!(models.len(), 9, "{}", light.display());
    for m in &models {
        let out = stretch_ok(&["inspect", m.to_str().unwrap(), "--json"]);
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(doc["total"]["macs"].as_u64().unwrap() > 100_000_000, "{}", m.display());
    }
    let shufflenet = light.join("light_shufflenet.onnx");
    let host = repo().join("configs/devices/host.toml");
    let written = scratch("light-plan").join("plan.json");
    stretch_ok(&[
        "plan",
        shufflenet.to_str().unwrap(),
        "--device",
        host.to_str().unwrap(),
        "-o",
        written.to_str().unwrap(),
    ]);
    let plan: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    assert_eq!(plan["stages"].as_array().unwrap().len(), 4, "{plan}");
}
