//! The table `stretch compare-accuracy` and a sweep print: one line per
//! row ([`training::comparison::Row`]).

use training::comparison::Row;

use crate::format::si;

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
