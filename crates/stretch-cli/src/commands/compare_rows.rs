//! The rows of `stretch compare-accuracy`: one per trained model, and with
//! `--precision profile` one per quantized version of each branched model.

use serde::Serialize;

use crate::format::si;

/// One trained model of the comparison.
#[derive(Serialize, Debug)]
pub(crate) struct Row {
    pub label: String,
    pub file: String,
    pub distilled: bool,
    pub params: u64,
    pub macs: u64,
    pub top1: f64,
    pub top5: f64,
    pub best_top1: f64,
    pub gap_top1: f64,
    pub train_seconds: f64,
    pub precision: &'static str,
    pub file_bytes: u64,
    pub gap_fp32_branched: Option<f64>,
}

/// The comparison table's cells, a header first.
pub(crate) fn lines(rows: &[Row]) -> Vec<Vec<String>> {
    let mut lines = vec![vec![
        "model".to_string(),
        "params".into(),
        "MACs".into(),
        "val top-1".into(),
        "val top-5".into(),
        "gap top-1".into(),
        "vs fp32 branched".into(),
        "file".into(),
        "train time".into(),
    ]];
    for r in rows {
        lines.push(vec![
            if r.precision == "fp32" {
                format!("{} ({})", r.label, r.file)
            } else {
                format!("{} ({} of {})", r.label, r.precision, r.file)
            },
            si(r.params),
            si(r.macs),
            format!("{:.2}%", r.top1),
            format!("{:.2}%", r.top5),
            if r.label == "original" {
                "-".into()
            } else {
                format!("{:+.2}", r.gap_top1)
            },
            r.gap_fp32_branched.map_or("-".into(), |g| format!("{g:+.2}")),
            format!("{:.2} MB", r.file_bytes as f64 / 1e6),
            format!("{:.1} s", r.train_seconds),
        ]);
    }
    lines
}
