//! Overheads of Splash's thermal-aware scheduling pieces (paper §6.5: thermal
//! prediction < 2 µs, a policy decision < 20 µs, a refit < 150 µs): the
//! online model is first filled with a full window (2,000 inferences) from
//! the thermal emulator with random placements over four processors, then
//! each operation is timed in batches; prints the minimum and the median
//! per operation over the batches.
//!
//! `cargo run --release -p scheduler-rt --example thermal_overhead [BATCHES]`

use graph_ir::rng::SplitMix64;
use multi_dnn::splash::min_heat::{MinHeat, ThermalOption};
use multi_dnn::splash::thermal::{OnlineThermalModel, ThermalEmulator, illustrative_phone};
use std::hint::black_box;
use std::time::Instant;

/// (min, median) µs per operation of `batches` batches of `per_batch` calls.
fn time(batches: usize, per_batch: usize, mut op: impl FnMut(usize)) -> (f64, f64) {
    let v: Vec<f64> = (0..batches)
        .map(|b| {
            let t = Instant::now();
            for i in 0..per_batch {
                op(b * per_batch + i);
            }
            t.elapsed().as_secs_f64() * 1e6 / per_batch as f64
        })
        .collect();
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    (min, graph_ir::stats::median_nan(&v))
}

fn main() {
    let batches: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(50);
    let mut emu = ThermalEmulator::new(illustrative_phone()).expect("valid parameters");
    let n = emu.params().nodes.len();
    let mut model = OnlineThermalModel::new(n, OnlineThermalModel::DEFAULT_WINDOW);
    let mut rng = SplitMix64::new(1);
    let base_ms = [11.0, 7.7, 8.6, 9.4];
    let mut samples = Vec::new();
    for _ in 0..OnlineThermalModel::DEFAULT_WINDOW + 200 {
        emu.advance(rng.next_f64() * 30.0, 1.0, &vec![0.0; n])
            .expect("stable step");
        let mut w = rng.below(n);
        while !emu.available(w) {
            w = rng.below(n);
        }
        let (temps, freqs) = (emu.temps().to_vec(), emu.frequencies());
        let ms = base_ms[w] * emu.latency_factor(w);
        let mut busy = vec![0.0; n];
        busy[w] = 1.0;
        emu.advance(ms, 1.0, &busy).expect("stable step");
        samples.push((w, temps, freqs, ms, emu.temps()[w]));
    }
    for (w, temps, freqs, ms, after) in &samples[..OnlineThermalModel::DEFAULT_WINDOW] {
        model.observe(*w, (temps, freqs), *ms, (0, 0), *after);
    }
    let (temps, freqs) = (emu.temps().to_vec(), emu.frequencies());
    let predict = time(batches, 2000, |i| {
        black_box(model.rise(i % n, black_box(&temps), &freqs, base_ms[i % n], (0, 0)));
    });
    let mut policy = MinHeat::default();
    let decide = time(batches, 2000, |i| {
        let options: Vec<ThermalOption> = (0..n)
            .map(|k| ThermalOption {
                worker: k,
                candidate: 0,
                ms: base_ms[k],
                finish_ms: base_ms[k] + (i % 7) as f64,
                rise_c: model.rise(k, &temps, &freqs, base_ms[k], (0, 0)).unwrap_or(0.0),
            })
            .collect();
        black_box(policy.choose(15.0, &options));
    });
    let extra = &samples[OnlineThermalModel::DEFAULT_WINDOW..];
    let refit = time(batches, 20, |i| {
        let (w, t, f, ms, after) = &extra[i % extra.len()];
        model.observe(*w, (t, f), *ms, (0, 0), *after);
    });
    println!(
        "{n} workers, window {} inferences, {batches} batches",
        OnlineThermalModel::DEFAULT_WINDOW
    );
    println!("operation                         min µs   median µs   Splash's figure");
    println!(
        "thermal prediction (one worker) {:>9.3} {:>11.3}   < 2 µs",
        predict.0, predict.1
    );
    println!(
        "min-heat decision ({n} predictions){:>8.3} {:>11.3}   < 20 µs",
        decide.0, decide.1
    );
    println!(
        "refit after an inference        {:>9.3} {:>11.3}   < 150 µs",
        refit.0, refit.1
    );
}
