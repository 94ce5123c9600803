//! Derives a processor's `peak_gflops` from a latency ratio to a reference
//! processor on a model, the way papers state their devices ("ResNet-50 on
//! the DSP runs at about 0.9x the CPU's latency").
//!
//! Scales the processor's peak until the analytic model's predicted latency
//! of the model hits `ratio` times the reference processor's, and prints the
//! peak with the achieved ratio. The other figures of the profile are kept.
//!
//! `cargo run --release -p predictor --example calibrate_ratios -- configs/devices/snapdragon855.toml fixtures/models/resnet50.onnx cpu gpu=1.05 dsp=0.9`

use graph_ir::onnx::{ImportOptions, import_file};
use predictor::profile::DeviceProfile;
use predictor::{AnalyticModel, LatencyModel};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: calibrate_ratios PROFILE.toml MODEL.onnx REFERENCE PROC=RATIO...");
        std::process::exit(2);
    }
    let fail = |e: String| -> ! {
        eprintln!("error: {e}");
        std::process::exit(1)
    };
    let mut profile = DeviceProfile::load(&args[0]).unwrap_or_else(|e| fail(e.to_string()));
    let graph = import_file(&args[1], &ImportOptions::default()).unwrap_or_else(|e| fail(e.to_string()));
    let reference = &args[2];
    let latency = |profile: &DeviceProfile, p: &str| -> f64 {
        AnalyticModel::new(profile.clone())
            .predict_graph(&graph, p)
            .unwrap_or_else(|e| fail(e.to_string()))
            .total_ms
    };
    let base = latency(&profile, reference);
    println!("{reference}: {base:.2} ms (predicted, reference)");
    for spec in &args[3..] {
        let Some((name, ratio)) = spec.split_once('=') else {
            fail(format!("`{spec}`: expected PROC=RATIO"))
        };
        let ratio: f64 = ratio
            .parse()
            .unwrap_or_else(|_| fail(format!("`{spec}`: ratio is not a number")));
        let target = base * ratio;
        for _ in 0..40 {
            let now = latency(&profile, name);
            let p = profile
                .processors
                .get_mut(name)
                .unwrap_or_else(|| fail(format!("no processor `{name}`")));
            p.peak_gflops.value *= (now / target).clamp(0.5, 2.0);
        }
        let got = latency(&profile, name);
        println!(
            "{name}: peak_gflops = {:.2} gives {got:.2} ms (predicted), {:.3}x {reference} (asked {ratio})",
            profile.processors[name].peak_gflops.value,
            got / base
        );
    }
}
