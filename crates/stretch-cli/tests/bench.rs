//! `stretch bench` on a small two-branch model and its sequential original.

mod common;

use common::{scratch, stretch, stretch_ok};
use scheduler_rt::testing::{branched_sized, sequential_sized};

/// A small two-branch model, its sequential original and a trace path in `dir`.
fn models(dir: &std::path::Path) -> [String; 3] {
    let (b, o, t) = (dir.join("b.onnx"), dir.join("o.onnx"), dir.join("trace.json"));
    graph_ir::onnx::export_file(&branched_sized(8, 1, &["cpu0", "cpu1"], 16).unwrap(), &b).unwrap();
    graph_ir::onnx::export_file(&sequential_sized(8, 1, 16).unwrap(), &o).unwrap();
    [b, o, t].map(|p| p.to_string_lossy().into_owned())
}

#[test]
fn bench_reports_every_configuration_and_writes_a_trace() {
    let dir = scratch("bench");
    let [b, o, t] = models(&dir);
    let (b, o, t) = (b.as_str(), o.as_str(), t.as_str());
    let out = stretch_ok(&[
        "bench",
        b,
        "--original",
        o,
        "--runs",
        "3",
        "--warmup",
        "1",
        "--block",
        "2",
        "--trace",
        t,
    ]);
    assert!(out.contains("3 timed runs each, interleaved in blocks of 2"), "{out}");
    for row in [
        "original, 1 core",
        "intra-op threads",
        "original, onnxruntime 2 threads",
        "branched, 1 core (sequential)",
        "branched, 2 processors",
        "branched, 1 core (sequential), ort",
        "branched, 2 processors, ort",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(row) || l.contains(&format!("{row} ")))
            .unwrap_or_else(|| panic!("{row} missing:\n{out}"));
        let ms: Vec<f64> = line
            .split_whitespace()
            .rev()
            .take(3)
            .filter_map(|v| v.parse().ok())
            .collect();
        assert!(ms.len() == 3 && ms.iter().all(|v| v.is_finite() && *v > 0.0), "{line}");
    }
    assert_eq!(out.matches("speedup of branched").count(), 6, "{out}");
    assert_eq!(out.matches("\nideal     branched, 2 processors").count(), 2, "{out}");
    assert_eq!(out.matches("\nin-run    branched, 2 processors").count(), 2, "{out}");
    assert!(
        out.contains("\nsteal     CPU time stolen by the hypervisor: cpu0 "),
        "{out}"
    );
    assert!(
        out.contains("speedup of branched vs the onnxruntime reference (original, 2 threads, p50"),
        "{out}"
    );
    assert!(out.contains("engines   tract 0.") && out.contains("ort 1."), "{out}");
    assert!(
        out.contains("\nreference onnxruntime's session defaults, 2 threads (they spin"),
        "{out}"
    );
    let png = std::fs::read(dir.join("trace.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 4, "{trace}");
    assert!(out.contains("memory    weights: original "), "{out}");
    let copies = |row: &str| -> usize {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{row} ")) && l.contains("compiled subgraph copies"))
            .unwrap_or_else(|| panic!("no memory row for {row}:\n{out}"));
        let mib: f64 = line.trim_start()[row.len()..]
            .trim_start()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(mib.is_finite() && mib >= 0.0, "{line}");
        line.rsplit(", ")
            .next()
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(copies("original, 1 core"), 1);
    let g = graph_ir::onnx::import_file(b, &Default::default()).unwrap();
    let subgraphs = scheduler_rt::partition(&g, "cpu0").unwrap().subgraphs.len();
    assert_eq!(
        copies("branched, 2 processors"),
        subgraphs,
        "each subgraph compiled on its home processor only"
    );
    for p in ["cpu0", "cpu1"] {
        assert!(
            events.iter().any(|e| e["tid"] == p && e["args"]["processor"] == p),
            "{p} not in the trace"
        );
    }
    assert!(events.iter().any(|e| e["args"]["meeting_point"] == true), "{trace}");
    let out = stretch_ok(&[
        "bench",
        b,
        "--original",
        o,
        "--runs",
        "2",
        "--warmup",
        "0",
        "--trace",
        t,
        "--interference",
        "core0",
    ]);
    assert!(out.contains("CPU-burning thread pinned to core0"), "{out}");
    for line in [
        "branched, 2 processors, adaptive",
        "adaptive vs fixed placement: p50",
        "original, onnxruntime 2 threads p50",
        "adaptation: ",
    ] {
        assert!(out.contains(line), "{line} missing:\n{out}");
    }
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t).unwrap()).unwrap();
    let adaptive = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["pid"] == 2)
        .count();
    assert!(adaptive >= 2 * 4, "the adaptive runs are not in the trace:\n{trace}");
    let bad = stretch(&["bench", b, "--original", o, "--interference", "core999"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("core 999"));
    let bad = stretch(&["bench", b, "--original", o, "--runs", "0"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--runs must be at least 1"));
    let bad = stretch(&["bench", b, "--original", o, "--block", "0"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--block must be at least 1"));
}

/// `--json` holds every figure the text report prints: each configuration's
/// quantiles and loaded memory, each speedup (equal to the ratio of the
/// quantiles it is made of), the work ratio and the engines.
#[test]
fn bench_json_holds_every_figure() {
    let dir = scratch("bench-json");
    let [b, o, t] = models(&dir);
    let (b, o, t) = (b.as_str(), o.as_str(), t.as_str());
    let out = stretch_ok(&[
        "bench",
        b,
        "--original",
        o,
        "--runs",
        "3",
        "--warmup",
        "1",
        "--trace",
        t,
        "--json",
    ]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(r["schema"], "stretch.bench/1");
    let configs = r["configurations"].as_array().unwrap();
    assert_eq!(configs.len(), 7, "{r}");
    for c in configs {
        let q: Vec<f64> = ["min_ms", "p50_ms", "p90_ms", "p99_ms"]
            .iter()
            .map(|k| c[k].as_f64().unwrap())
            .collect();
        assert!(q.windows(2).all(|w| w[0] <= w[1]) && q[0] > 0.0, "{c}");
        assert!(c["compiled_subgraph_copies"].as_u64().unwrap() >= 1, "{c}");
    }
    let main = configs.iter().find(|c| c["name"] == "branched, 2 processors").unwrap();
    let speedups = r["speedups"].as_array().unwrap();
    assert_eq!(speedups.len(), 6, "{r}");
    for s in speedups {
        let versus = configs.iter().find(|c| c["name"] == s["versus"]).unwrap();
        let p50 = versus["p50_ms"].as_f64().unwrap() / main["p50_ms"].as_f64().unwrap();
        assert!((s["p50"].as_f64().unwrap() - p50).abs() < 1e-9, "{s}");
    }
    assert_eq!(speedups.iter().filter(|s| s["reference"] == true).count(), 1);
    let reference = r["reference"]
        .as_str()
        .unwrap_or_else(|| panic!("no reference spec: {r}"));
    assert!(
        reference.contains("threads=2") && reference.contains("engine=ort") && reference.contains("spin=on"),
        "{reference}"
    );
    assert_eq!(r["settle_after_spinning_ms"].as_f64(), Some(100.0));
    assert!(r["work"]["ratio"].as_f64().unwrap() > 0.0);
    let steal = r["steal"]["per_cpu"].as_object().expect("steal read from /proc/stat");
    assert!(
        !steal.is_empty() && steal.values().all(|v| (0.0..=1.0).contains(&v.as_f64().unwrap())),
        "{r}"
    );
    let ideals = r["ideals"].as_array().unwrap();
    assert_eq!(ideals.len(), 2, "{r}");
    for i in ideals {
        let seq = configs.iter().find(|c| c["name"] == i["sequential"]).unwrap();
        let on = configs.iter().find(|c| c["name"] == i["configuration"]).unwrap();
        let ideal = i["ideal_ms"].as_f64().unwrap();
        assert!(ideal > 0.0 && ideal <= 2.0 * seq["p50_ms"].as_f64().unwrap(), "{i}");
        assert_eq!(i["p50_ms"], on["p50_ms"], "{i}");
        assert!((i["p50_over_ideal"].as_f64().unwrap() - on["p50_ms"].as_f64().unwrap() / ideal).abs() < 1e-9);
        let in_run = i["in_run_ideal_ms"].as_f64().unwrap();
        let (beside, spread, between) = (
            i["beside_over_alone"].as_f64().unwrap(),
            i["spread_over_medians"].as_f64().unwrap(),
            i["p50_over_runs_ideal"].as_f64().unwrap(),
        );
        assert!((beside - in_run / ideal).abs() < 1e-9, "{i}");
        assert!(
            (spread - i["runs_ideal_ms"].as_f64().unwrap() / in_run).abs() < 1e-9,
            "{i}"
        );
        assert!(
            (beside * spread * between - i["p50_over_ideal"].as_f64().unwrap()).abs() < 1e-9,
            "{i}"
        );
        let subgraphs = i["subgraphs"].as_array().unwrap();
        assert!(subgraphs.len() > 2, "{i}");
        assert!(
            subgraphs.iter().any(|s| s["in_run_ms"] != s["sequential_ms"]),
            "in-run times taken from the sequential runs: {i}"
        );
        let sum = |key: &str, processor: Option<&str>| -> f64 {
            subgraphs
                .iter()
                .filter(|s| processor.is_none_or(|p| s["processor"] == p))
                .map(|s| s[key].as_f64().unwrap())
                .sum()
        };
        let seq_p50 = seq["p50_ms"].as_f64().unwrap();
        assert!(
            (0.5 * seq_p50..=1.05 * seq_p50).contains(&sum("sequential_ms", None)),
            "{i}"
        );
        for p in ["cpu0", "cpu1"] {
            assert!(
                sum("sequential_ms", Some(p)) > 0.0 && sum("sequential_ms", Some(p)) <= ideal + 1e-9,
                "{p}: {i}"
            );
            assert!(
                sum("in_run_ms", Some(p)) > 0.0 && sum("in_run_ms", Some(p)) <= in_run + 1e-9,
                "{p}: {i}"
            );
        }
    }
    assert!(r["engines"].as_array().unwrap().len() == 2, "{r}");
}
