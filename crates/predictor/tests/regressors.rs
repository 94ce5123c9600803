//! Per-kernel regressors: fitted from profiler rows, saved, reloaded to
//! identical predictions, and used by a device model for the classes they cover.

use engine::host::CoreSet;
use graph_ir::builder::{Builder, ConvSpec};
use predictor::fit::{KernelRegressors, RegressorError};
use predictor::profiler::csv::Row;
use predictor::profiler::timing::Statistic;
use predictor::profiler::{KernelKind, Origin};
use predictor::{DeviceModel, DeviceProfile, LatencyModel, Source};

fn row(kind: KernelKind, features: Vec<f64>, ms: f64) -> Row {
    Row {
        kind,
        round: 0,
        origin: Origin::Random,
        flops: features.iter().product::<f64>() as u64,
        bytes: 1000,
        features,
        median_ms: ms,
        p10_ms: ms,
        p90_ms: ms,
        reps: 3,
        engine: "tract".into(),
        threads: 1,
        cores: CoreSet::new(vec![0]).unwrap(),
    }
}

/// Conv rows whose latency follows their FLOPs, act rows that follow h*c.
fn rows() -> Vec<(usize, Row)> {
    let mut out = Vec::new();
    for i in 0..40usize {
        let (h, cin, cout) = (
            8.0 + (i % 5) as f64 * 8.0,
            16.0 * (1 + i % 4) as f64,
            32.0 * (1 + i % 3) as f64,
        );
        let flops = 2.0 * h * h * cin * cout * 9.0;
        let f = vec![h, cin, cout, 3.0, 1.0, flops, cin * cout * 9.0];
        out.push((i + 2, row(KernelKind::ConvBnRelu, f, flops / 1e9 + 0.01)));
        out.push((i + 100, row(KernelKind::Act, vec![h, cin], h * h * cin / 1e8 + 0.002)));
    }
    out
}

#[test]
fn regressors_fitted_to_the_tenth_percentile_predict_it_and_say_so() {
    let halved: Vec<(usize, Row)> = rows()
        .into_iter()
        .map(|(line, mut r)| {
            r.p10_ms = 0.5 * r.median_ms;
            (line, r)
        })
        .collect();
    let median = KernelRegressors::fit(&halved, "k.csv", 3, Statistic::Median).unwrap();
    let p10 = KernelRegressors::fit(&halved, "k.csv", 3, Statistic::P10).unwrap();
    assert_eq!((median.statistic, p10.statistic), (Statistic::Median, Statistic::P10));
    let probe = [16.0, 32.0, 64.0, 3.0, 1.0, 4_718_592.0, 18432.0];
    let at = |r: &KernelRegressors| r.predict(predictor::kernels::OpClass::Conv, &probe).unwrap().unwrap();
    let ratio = at(&p10) / at(&median);
    assert!((ratio - 0.5).abs() < 0.02, "p10 / median prediction {ratio}");
    let text = serde_json::to_string(&p10).unwrap();
    assert!(text.contains("\"statistic\":\"p10\""), "{text}");
    let old = text.replace(",\"statistic\":\"p10\"", "");
    let back: KernelRegressors = serde_json::from_str(&old).unwrap();
    assert_eq!(
        back.statistic,
        Statistic::Median,
        "files without the field were fitted to the median"
    );
}

#[test]
fn fitted_regressors_reload_to_identical_predictions() {
    let regs = KernelRegressors::fit(&rows(), "synthetic.csv", 3, Statistic::Median).unwrap();
    assert_eq!(regs.forests.keys().cloned().collect::<Vec<_>>(), vec!["act", "conv"]);
    assert_eq!(regs.report["conv"].rows, 40);
    assert!(regs.report["conv"].within_15 > 0.5, "{:?}", regs.report["conv"]);
    let dir = std::env::temp_dir().join(format!("stretch-regs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("regressors.json");
    regs.save(&file).unwrap();
    let back = KernelRegressors::load(&file).unwrap();
    assert_eq!(back, regs);
    let probe = [16.0, 32.0, 64.0, 3.0, 1.0, 4_718_592.0, 18432.0];
    let a = regs
        .predict(predictor::kernels::OpClass::Conv, &probe)
        .unwrap()
        .unwrap();
    let b = back
        .predict(predictor::kernels::OpClass::Conv, &probe)
        .unwrap()
        .unwrap();
    assert_eq!(a.to_bits(), b.to_bits());
    assert!(regs.predict(predictor::kernels::OpClass::Pool, &[1.0; 5]).is_none());

    let profile = r#"name = "t"
description = "test"
[processors.cpu0]
kind = "cpu"
peak_gflops = { value = 10.0, source = "t" }
efficiency = { value = 1.0, source = "t" }
bandwidth_gbs = { value = 10.0, source = "t" }
kernel_overhead_us = { value = 1.0, source = "t" }
regressors = "regressors.json"
"#;
    let toml = dir.join("t.toml");
    std::fs::write(&toml, profile).unwrap();
    let mut b = Builder::new("m");
    let x = b.input("x", &[1, 16, 16, 16]).unwrap();
    let y = b.conv_bn("c", x, ConvSpec::new(32, 3, 1), true).unwrap();
    let y = b.max_pool("p", y, 3, 2).unwrap();
    let g = b.finish("y", y).unwrap();
    let model = DeviceModel::load(&toml).unwrap();
    let p = model.predict_graph(&g, "cpu0").unwrap();
    let sources: Vec<bool> = p
        .kernels
        .iter()
        .map(|k| matches!(k.source, Source::Regressor { .. }))
        .collect();
    assert_eq!(
        sources,
        vec![true, false],
        "conv by the forest, pool by the analytic model"
    );
    let sum: f64 = p.kernels.iter().map(|k| k.ms).sum();
    assert!((p.total_ms - sum).abs() < 1e-12);
    let analytic = DeviceModel::analytic(DeviceProfile::load(&toml).unwrap());
    assert!(
        analytic
            .predict_graph(&g, "cpu0")
            .unwrap()
            .kernels
            .iter()
            .all(|k| k.source == Source::Analytic)
    );
    let mut b = Builder::new("big");
    let x = b.input("x", &[1, 64, 160, 160]).unwrap();
    let y = b.conv_bn("c", x, ConvSpec::new(256, 3, 1), true).unwrap();
    let big = b.finish("y", y).unwrap();
    let p = model.predict_graph(&big, "cpu0").unwrap();
    let roof = analytic.predict_graph(&big, "cpu0").unwrap();
    assert_eq!(
        p.kernels[0].source,
        Source::Extrapolated {
            file: file.display().to_string(),
            feature: "h".into()
        },
        "h = 160 lies beyond the fitted rows' 40"
    );
    let forest = regs
        .predict(predictor::kernels::OpClass::Conv, &p.kernels[0].features)
        .unwrap()
        .unwrap();
    let gflop = 2.0 * 160.0 * 160.0 * 64.0 * 256.0 * 9.0 / 1e9;
    assert!(
        forest > 0.9 * gflop && forest < 1.3 * gflop,
        "the conv forest predicts per GFLOP and keeps its range's edge efficiency (1 ms per GFLOP): {forest} ms for {gflop} GFLOP"
    );
    let activations_ms = 1e3 * 4.0 * (64.0 + 256.0) * 160.0 * 160.0 / 10e9;
    let ms = p.kernels[0].ms;
    assert!(
        ms >= forest && ms >= activations_ms && ms < 1.05 * forest.max(activations_ms),
        "beyond its range, the forest's figure but at least its bytes at the bandwidth: {ms} ms"
    );
    assert!(
        roof.kernels[0].ms > 50.0 * ms,
        "not the compute roofline at the profile's average throughput ({} ms)",
        roof.kernels[0].ms
    );
    assert_eq!(regs.beyond_range(predictor::kernels::OpClass::Conv, &probe), None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rows_from_different_engine_settings_are_refused_with_their_line() {
    let mut rows = rows();
    rows[7].1.threads = 2;
    let line = rows[7].0;
    let e = KernelRegressors::fit(&rows, "k.csv", 0, Statistic::Median).unwrap_err();
    assert!(
        matches!(e, RegressorError::Mixed { line: l, what: "threads", .. } if l == line),
        "{e}"
    );
    assert!(e.to_string().contains(&format!("k.csv line {line}")), "{e}");
}

#[test]
fn a_missing_or_foreign_file_is_named() {
    let e = KernelRegressors::load(std::path::Path::new("/nonexistent/r.json")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/r.json"), "{e}");
    let f = std::env::temp_dir().join(format!("stretch-foreign-{}.json", std::process::id()));
    std::fs::write(&f, r#"{"format": "other/1"}"#).unwrap();
    let e = KernelRegressors::load(&f).unwrap_err();
    assert!(e.to_string().contains("other/1"), "{e}");
    let _ = std::fs::remove_file(&f);
}

/// 3x3 convolutions (cin = cout = c) whose time per FLOP is 1.3x where
/// `c` is 8 or 16 modulo 32, as tract's kernels run them on AVX-512.
fn tiled_conv_rows(skip: &[usize]) -> Vec<(usize, Row)> {
    let mut out = Vec::new();
    for h in [14.0, 28.0] {
        for c in (64..=384).step_by(8).filter(|c| !skip.contains(c)) {
            let cf = c as f64;
            let flops = 2.0 * h * h * cf * cf * 9.0;
            let slow = if matches!(c % 32, 8 | 16) { 1.3 } else { 1.0 };
            let f = vec![h, cf, cf, 3.0, 1.0, flops, cf * cf * 9.0];
            out.push((out.len() + 2, row(KernelKind::ConvBnRelu, f, slow * flops / 1e8)));
        }
    }
    out
}

#[test]
fn a_conv_forest_learns_the_output_channels_last_tile() {
    let regs = KernelRegressors::fit(&tiled_conv_rows(&[296, 304]), "k.csv", 0, Statistic::P10).unwrap();
    let at = |c: f64| {
        let flops = 2.0 * 14.0 * 14.0 * c * c * 9.0;
        regs.predict(
            predictor::kernels::OpClass::Conv,
            &[14.0, c, c, 3.0, 1.0, flops, c * c * 9.0],
        )
        .unwrap()
        .unwrap()
    };
    let (unseen_slow, fast) = (at(304.0), at(312.0));
    assert!(
        unseen_slow > 1.1 * fast,
        "cout 304 (16 mod 32, never fitted) {unseen_slow} ms against cout 312 (24 mod 32) {fast} ms"
    );
}

#[test]
fn forests_fitted_before_the_tile_feature_still_predict() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/profiles/host/cpu0/regressors.json");
    let regs = KernelRegressors::load(&path).unwrap();
    let conv = regs.forests.get("conv").expect("a conv forest");
    assert!(
        !conv.feature_names().iter().any(|n| n == "cout_tail"),
        "{path:?} is not an old file any more"
    );
    let c = 176.0;
    let flops = 2.0 * 14.0 * 14.0 * c * c * 9.0;
    let ms = regs
        .predict(
            predictor::kernels::OpClass::Conv,
            &[14.0, c, c, 3.0, 1.0, flops, c * c * 9.0],
        )
        .unwrap()
        .unwrap();
    assert!(ms > 0.1 && ms < 10.0, "{ms} ms");
}

#[test]
fn a_forest_reading_a_feature_this_build_lacks_is_named() {
    let regs = KernelRegressors::fit(&tiled_conv_rows(&[]), "k.csv", 0, Statistic::P10).unwrap();
    let f = std::env::temp_dir().join(format!("stretch-unknown-feature-{}.json", std::process::id()));
    regs.save(&f).unwrap();
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("\"cout_tail\"", "\"cout_tile9\"");
    std::fs::write(&f, text).unwrap();
    let e = KernelRegressors::load(&f).unwrap_err();
    assert!(
        matches!(&e, RegressorError::UnknownFeature { class, feature, .. } if class == "conv" && feature == "cout_tile9"),
        "{e}"
    );
    assert!(
        e.to_string().contains("cout_tail"),
        "names what this build computes: {e}"
    );
    let _ = std::fs::remove_file(&f);
}
