//! The ONNX package's own node test cases for the operators modern CNNs
//! need (LayerNormalization, Gelu, Erf, Mish, Log, GlobalMaxPool,
//! DepthToSpace, SpaceToDepth, MatMul with vectors, cubic Resize) and for
//! ceil-mode pooling, rebuilt from the package's case code by
//! `scripts/fixtures/node_cases.py`, as given and with parameter inputs
//! frozen into weights. Every case converts, and the converted file passes
//! `onnx.checker` (full check) and reproduces the case's stored outputs in
//! onnxruntime (rtol 1e-3, atol 1e-4, every value), or it is refused with
//! one error line for a reason in [`REFUSED`] (or, as given, because a
//! shape-deciding input such as Resize's scales is a graph input; its
//! frozen variant must convert). Where onnxruntime does not reproduce the
//! stored outputs from the case's own model either (cubic `align_corners`
//! downsampling: the package's reference takes `scale · length` as the
//! output length, onnxruntime the integer length), the converted file must
//! give what onnxruntime gives for the case's model.

mod common;

use common::{python, reference, repo, scratch, stretch};
use std::collections::BTreeMap;

/// What may be refused: 3-D pooling windows and antialiased resizing.
const REFUSED: &[&str] = &["makes it 3-D", "antialias"];

/// Op types every one of which must have converted cases.
const OPS: &[&str] = &[
    "layer_normalization",
    "gelu",
    "erf",
    "mish",
    "log",
    "globalmaxpool",
    "depthtospace",
    "spacetodepth",
    "matmul",
    "resize",
    "averagepool",
    "maxpool",
];

#[test]
fn node_cases_of_modern_cnn_operators_convert_and_match() {
    let out = scratch("node-cases");
    let cases_dir = out.join("cases");
    let made = std::process::Command::new(python())
        .arg(repo().join("scripts/fixtures/node_cases.py"))
        .arg(&cases_dir)
        .output()
        .expect("run python (install the reference tools with scripts/setup.sh)");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let mut cases: Vec<_> = std::fs::read_dir(&cases_dir)
        .expect("cases")
        .flatten()
        .map(|e| e.path())
        .collect();
    cases.sort();
    assert!(cases.len() >= 80, "only {} cases", cases.len());
    let mut converted = Vec::new();
    let mut per_op: BTreeMap<&str, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let dst = out.join(format!("{name}.onnx"));
        let run = stretch(&[
            "convert",
            case.join("model.onnx").to_str().unwrap(),
            "-o",
            dst.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        if run.status.success() {
            converted.push(format!("{} {}", dst.display(), case.display()));
            if let Some(op) = OPS.iter().find(|op| name.starts_with(&format!("test_{op}"))) {
                *per_op.entry(op).or_default() += 1;
            }
            continue;
        }
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        let clear = run.status.code() == Some(1) && lines.len() == 1 && !err.contains("panicked");
        let shape_input = !name.ends_with("_frozen") && err.contains("must be a constant");
        if !clear || !(shape_input || REFUSED.iter().any(|r| lines[0].contains(r))) {
            wrong.push(format!("{name}: {err}"));
        }
    }
    assert!(wrong.is_empty(), "refused, or not clearly:\n{}", wrong.join("\n"));
    for op in OPS {
        assert!(
            per_op.get(op).copied().unwrap_or(0) > 0,
            "no {op} case converted: {per_op:?}"
        );
    }
    let list = out.join("converted.txt");
    std::fs::write(&list, converted.join("\n")).unwrap();
    reference(&["testdata-list", list.to_str().unwrap(), "--or-original"]);
}
