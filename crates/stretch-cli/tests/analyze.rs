//! `stretch analyze` (Puzzle) and `stretch simulate --plan`: a search on
//! small fixtures with the S23 Ultra profile (Puzzle Table 3 totals),
//! the plan read back and simulated to the analyzer's own figures, the
//! same seed giving the same plan, and one clear error for each bad input.

mod common;

use common::{repo, scratch, stretch, stretch_ok};
use std::path::Path;

fn workload(dir: &Path, apps: &[(&str, &str)], groups: &[&str]) -> String {
    let mut text = String::from("seed = 1\nduration_s = 1\n");
    for g in groups {
        text += &format!("[[group]]\nname = \"{g}\"\nperiod_multiplier = 1.0\n");
    }
    for (i, (name, model)) in apps.iter().enumerate() {
        let group = groups[i % groups.len()];
        let path = repo().join(model);
        text += &format!(
            "[[app]]\nname = \"{name}\"\nmodel = \"{}\"\narrival = \"group\"\ngroup = \"{group}\"\n",
            path.display()
        );
    }
    let p = dir.join("w.toml");
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn device() -> String {
    repo()
        .join("configs/devices/s23ultra.toml")
        .to_str()
        .unwrap()
        .to_string()
}

const APPS: &[(&str, &str)] = &[
    ("face_det", "fixtures/vision/yolo_tiny.onnx"),
    ("hand_det", "fixtures/models/resnet18.onnx"),
    ("yolov8n", "fixtures/vision/yolo_tiny.onnx"),
];

fn figure(json: &serde_json::Value, key: &str) -> f64 {
    json["figures"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key} in {json}"))
}

/// The chosen plan's α* is at most the best single processor's and the
/// best mapping's in `analyze`'s report `out` (a search too small to find
/// them still returns them).
fn never_behind_the_baselines(out: &str) {
    let alpha_of = |line: &str| -> f64 {
        let a = line.split("α* ").nth(1).unwrap_or_else(|| panic!("no α* in {line}"));
        a.split([' ', ';']).next().unwrap().parse().unwrap_or(f64::INFINITY)
    };
    let chosen = alpha_of(
        out.lines()
            .find(|l| l.starts_with("chosen: plan"))
            .expect("a chosen line"),
    );
    for baseline in ["single processor (", "best mapping ("] {
        let row = out
            .lines()
            .find(|l| l.trim_start().starts_with(baseline))
            .expect("a baseline row");
        let a: f64 = row.split_whitespace().last().unwrap().parse().unwrap_or(f64::INFINITY);
        assert!(chosen <= a, "the chosen plan's α* {chosen} is worse than {row}:\n{out}");
    }
}

/// The ideal α* `analyze` printed.
fn ideal_alpha(out: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.starts_with("ideal α* "))
        .unwrap_or_else(|| panic!("no ideal α* in:\n{out}"));
    line["ideal α* ".len()..].split(' ').next().unwrap().parse().unwrap()
}

/// Four copies of one model in a group on two processors of nearly one
/// speed: the best mapping (two copies on each) reaches the ideal, which
/// therefore is not a loose floor there (the processors' load binds, not
/// a copy's latency: a quarter of the base period).
#[test]
fn the_ideal_is_reached_where_a_mapping_balances_two_processors() {
    let dir = scratch("analyze-ideal");
    let model = "fixtures/models/resnet18.onnx";
    let apps = [("a", model), ("b", model), ("c", model), ("d", model)];
    let w = workload(&dir, &apps, &["g"]);
    let host = repo().join("configs/devices/host.toml");
    let out = stretch_ok(&[
        "analyze",
        "--workload",
        &w,
        "--device",
        host.to_str().unwrap(),
        "--generations",
        "2",
        "--population",
        "8",
    ]);
    let ideal = ideal_alpha(&out);
    let best = out
        .lines()
        .find(|l| l.trim_start().starts_with("best mapping ("))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|a| a.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no best mapping α* in:\n{out}"));
    assert!(
        ideal > 0.4 && ideal <= best && best - ideal < 0.015,
        "ideal {ideal}, best mapping {best}:\n{out}"
    );
}

#[test]
fn analyze_writes_a_plan_that_simulate_reproduces_and_the_seed_fixes_it() {
    let dir = scratch("analyze");
    let w = workload(&dir, APPS, &["camera"]);
    let (p1, p2) = (dir.join("p1.json"), dir.join("p2.json"));
    let png = dir.join("front.png");
    let dev = device();
    let analyze = |extra: &[&str]| {
        let mut args = vec!["analyze", "--workload", &w, "--device", &dev];
        args.extend(extra);
        stretch_ok(&args)
    };
    let search = |plan: &Path, extra: &[&str]| {
        let plan = plan.to_str().unwrap().to_string();
        let mut args = vec!["--generations", "4", "--population", "8", "-o", &plan];
        args.extend(extra);
        analyze(&args)
    };
    let out = search(&p1, &["--front", png.to_str().unwrap()]);
    for needle in [
        "Pareto front",
        "chosen: plan",
        "single processor (",
        "best mapping",
        "Band lst",
        "simulated",
    ] {
        assert!(out.contains(needle), "no '{needle}' in:\n{out}");
    }
    assert!(std::fs::metadata(&png).unwrap().len() > 1000);
    never_behind_the_baselines(&out);
    let ideal = ideal_alpha(&out);
    let baseline = |l: &&str| {
        ["single processor (", "best mapping (", "Band lst"]
            .iter()
            .any(|b| l.trim_start().starts_with(b))
    };
    for line in out
        .lines()
        .filter(|l| l.contains("α* ") && !l.starts_with("ideal") && !baseline(l))
    {
        let a = line.split("α* ").nth(1).unwrap().split([' ', ';']).next().unwrap();
        assert!(
            a.parse().unwrap_or(f64::INFINITY) >= ideal,
            "{line} is below the ideal {ideal}:\n{out}"
        );
    }
    for line in out.lines().filter(baseline) {
        let a: f64 = line.split_whitespace().last().unwrap().parse().unwrap_or(f64::INFINITY);
        assert!(a >= ideal, "{line} is below the ideal {ideal}:\n{out}");
    }
    for seed in ["0", "1"] {
        let small = analyze(&["--generations", "1", "--population", "2", "--seed", seed]);
        never_behind_the_baselines(&small);
    }
    search(&p2, &[]);
    let (a, b) = (
        std::fs::read_to_string(&p1).unwrap(),
        std::fs::read_to_string(&p2).unwrap(),
    );
    assert_eq!(a, b, "the same seed must give the same plan");
    let plan: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(plan["apps"].as_array().unwrap().len(), 3);
    let sat = figure(&plan, "saturation_multiplier");
    let score = figure(&plan, "score");
    let simulate = |extra: &[&str]| {
        let mut args = vec![
            "simulate",
            "--workload",
            &w,
            "--device",
            &dev,
            "--plan",
            p1.to_str().unwrap(),
        ];
        args.extend(extra);
        stretch(&args)
    };
    let out = simulate(&["--slo-multipliers", &format!("1,{sat}")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sim = String::from_utf8_lossy(&out.stdout).into_owned();
    let scores: Vec<f64> = sim
        .lines()
        .filter_map(|l| l.strip_prefix("period multiplier "))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(scores.len(), 2, "{sim}");
    assert!(
        (scores[0] - score).abs() < 1e-3,
        "analyze said {score}, simulate {}:\n{sim}",
        scores[0]
    );
    assert!(scores[1] >= 0.999, "at α* = {sat} the plan must score 1:\n{sim}");
    assert!(sim.contains(&format!("saturation multiplier α*: {sat:.2}")), "{sim}");
    let out = simulate(&["--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints only JSON");
    assert_eq!(report["kind"], "simulated");
    assert!(
        (report["runs"][0]["score"].as_f64().unwrap() - score).abs() < 1e-3,
        "{report}"
    );
    let out = simulate(&["--noise", "0.1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--noise does not apply with --plan"),
        "{err}"
    );
}

#[test]
fn bad_inputs_are_named() {
    let dir = scratch("analyze-bad");
    let one = workload(&dir, &APPS[..1], &["camera"]);
    let p = dir.join("one.json");
    let out = stretch(&[
        "analyze",
        "--workload",
        &one,
        "--device",
        &device(),
        "-o",
        p.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("nothing to search"), "{err}");
    assert!(p.exists(), "a one-model workload still gets the best mapping written");

    let profile = std::fs::read_to_string(device()).unwrap();
    let at = profile
        .find("[[links]]\nbetween = [\"gpu\", \"npu\"]")
        .expect("the gpu-npu link");
    let end = profile[at..].find("\n\n").map_or(profile.len(), |e| at + e);
    let unlinked = dir.join("unlinked.toml");
    std::fs::write(&unlinked, format!("{}{}", &profile[..at], &profile[end..])).unwrap();
    let two = workload(&dir, &APPS[..2], &["camera"]);
    let out = stretch(&["analyze", "--workload", &two, "--device", unlinked.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("cannot price a hand-off from gpu to npu") && err.contains("[[links]]"),
        "{err}"
    );

    let three = workload(&dir, APPS, &["camera"]);
    let out = stretch(&[
        "simulate",
        "--workload",
        &three,
        "--device",
        &device(),
        "--plan",
        p.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("made for apps [\"face_det\"]") && err.contains("hand_det"),
        "{err}"
    );

    let out = stretch(&[
        "analyze",
        "--workload",
        &three,
        "--device",
        &device(),
        "--generations",
        "0",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--generations 0"), "{err}");

    let plain = dir.join("plain.toml");
    std::fs::write(
        &plain,
        format!(
            "duration_s = 1\n[[app]]\nmodel = \"{}\"\narrival = \"closed\"\n",
            repo().join("fixtures/models/resnet18.onnx").display()
        ),
    )
    .unwrap();
    let out = stretch(&["analyze", "--workload", plain.to_str().unwrap(), "--device", &device()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no [[group]]"), "{err}");
}

#[test]
fn measured_plans_are_served_for_real_and_pieces_are_measured_once() {
    let dir = scratch("analyze-host");
    for (name, size) in [("mini", "32"), ("mb", "32")] {
        let zoo = if name == "mini" { "resnet-mini" } else { "mbnet-mini" };
        let p = dir.join(format!("{name}.onnx"));
        stretch_ok(&["zoo", zoo, "--input-size", size, "-o", p.to_str().unwrap()]);
    }
    let rc = dir.join("rt.toml");
    std::fs::write(
        &rc,
        "[[processor]]\nname = \"cpu0\"\nkind = \"pool\"\n[[processor]]\nname = \"npu\"\nkind = \"pool\"\nunsupported = [\"Gemm\", \"DepthwiseConv\"]\n",
    )
    .unwrap();
    let w = dir.join("w.toml");
    std::fs::write(
        &w,
        "seed = 1\nduration_s = 1\n[[group]]\nname = \"camera\"\nperiod_multiplier = 1.5\n\
         [[app]]\nname = \"mini\"\nmodel = \"mini.onnx\"\narrival = \"group\"\ngroup = \"camera\"\n\
         [[app]]\nname = \"mb\"\nmodel = \"mb.onnx\"\narrival = \"group\"\ngroup = \"camera\"\n",
    )
    .unwrap();
    let (w, rc) = (w.to_str().unwrap(), rc.to_str().unwrap());
    let missing = dir.join("missing-plan.json");
    let out = stretch(&[
        "serve",
        "--workload",
        w,
        "--runtime-config",
        rc,
        "--plan",
        missing.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("missing-plan.json: cannot read"),
        "{err}"
    );
    assert!(
        !err.contains("isolated p99"),
        "the plan is read before any model runs: {err}"
    );
    let db = dir.join("db.json");
    let plan = dir.join("plan.json");
    let args = [
        "analyze",
        "--workload",
        w,
        "--runtime-config",
        rc,
        "--cost-db",
        db.to_str().unwrap(),
        "--generations",
        "2",
        "--population",
        "4",
        "--periods",
        "10",
        "-o",
        plan.to_str().unwrap(),
    ];
    let first = stretch_ok(&args);
    assert!(first.contains("costs measured on this machine"), "{first}");
    let retimed = first
        .lines()
        .find_map(|l| l.trim().strip_prefix("pieces timed again after the search: "))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<usize>().ok());
    assert!(
        retimed.is_some_and(|n| n > 0),
        "the chosen plan's pieces must be timed again:\n{first}"
    );
    assert!(
        first.contains("re-timed: ") && first.contains("on a second fresh timing"),
        "{first}"
    );
    let again = stretch_ok(&args);
    let pieces = |text: &str| -> (usize, usize) {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("pieces: "))
            .expect("a pieces line");
        let num = |after: &str| -> usize {
            let rest = &line[line.find(after).expect("field") + after.len()..];
            rest.split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .expect("a count")
        };
        (num("pieces: "), num("measured now, "))
    };
    let (measured_first, _) = pieces(&first);
    let (measured_again, taken_again) = pieces(&again);
    assert!(measured_first > 0, "{first}");
    // The hand-offs and contention are measured afresh on every run, so the
    // second search may try a few pieces the first never did (measured
    // then); the pieces it shares with the first come from the database.
    assert!(
        taken_again > 0 && 2 * measured_again < taken_again,
        "pieces measured before must come from the database:\n{first}\n{again}"
    );
    let best = dir.join("plan.best-mapping.json");
    let trace = dir.join("trace.json");
    let out = stretch_ok(&[
        "serve",
        "--workload",
        w,
        "--runtime-config",
        rc,
        "--plan",
        plan.to_str().unwrap(),
        "--plan",
        best.to_str().unwrap(),
        "--isolated-runs",
        "3",
        "--retime",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(first.contains("driver wake-up for a tick"), "{first}");
    let figures: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let apps = figures["figures"]["apps"].as_array().expect("per-app figures");
    let again_figures = &figures["figures"]["retimed"];
    assert!(
        again_figures["candidates"].as_u64().is_some_and(|n| n >= 1),
        "{figures}"
    );
    assert_eq!(apps.len(), 2, "{apps:?}");
    let chosen_best = again_figures["best_mapping"]
        .as_bool()
        .expect("whether the best mapping was chosen");
    let best_file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&best).unwrap()).unwrap();
    if chosen_best {
        assert!(again_figures["from_front_plan"].is_null(), "{figures}");
        assert_eq!(
            figures["apps"], best_file["apps"],
            "the best mapping chosen is written as the plan"
        );
    } else {
        assert!(again_figures["from_front_plan"].as_u64().is_some(), "{figures}");
    }
    let group = &figures["figures"]["groups"][0];
    let (mean, p50) = (
        group["mean_makespan_ms"].as_f64().expect("mean makespan"),
        group["p50_makespan_ms"].as_f64().expect("median makespan"),
    );
    let said = format!("predicted by analyze mean {mean:.2} ms, p50 {p50:.2} ms; measured mean");
    assert!(out.contains(&said), "no '{said}' in:\n{out}");
    for needle in [
        "plan plan.json (static): score",
        "plan plan.best-mapping.json (static): score",
        "Band lst (online): score",
        "predicted by analyze",
        "where the time went",
        "(brackets: simulated with the pieces re-timed now)",
        "simulated with the pieces re-timed before each round",
        "CPU time stolen by the hypervisor",
        "every output of the plans equalled the whole-model reference",
    ] {
        assert!(out.contains(needle), "no '{needle}' in:\n{out}");
    }
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let runs: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert_eq!(runs, ["plan.json", "plan.best-mapping.json", "Band lst (online)"]);
    for pid in 1..=3 {
        assert!(
            events.iter().any(|e| e["ph"] == "X" && e["pid"] == pid),
            "no subgraph of run {pid} in the trace"
        );
    }

    let serve = |extra: &[&str]| {
        let mut args = vec![
            "serve",
            "--workload",
            w,
            "--runtime-config",
            rc,
            "--plan",
            plan.to_str().unwrap(),
        ];
        args.extend(["--isolated-runs", "3", "--no-check", "--duration-s", "0.5"]);
        args.extend(extra);
        stretch(&args)
    };
    let out = serve(&["--json", "--retime"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints only JSON");
    assert_eq!(report["kind"], "measured");
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "the plan and lst: {report}");
    let group = &runs[0]["groups"][0];
    assert!(group["p50_makespan_ms"].as_f64().is_some_and(|m| m > 0.0), "{report}");
    assert!(group["predicted_by_analyze_ms"].as_f64().is_some(), "{report}");
    assert!(group["simulated_retimed_ms"].as_f64().is_some(), "{report}");
    assert!(
        report["retime_notes"].as_array().is_some_and(|n| !n.is_empty()),
        "{report}"
    );
    assert_eq!(runs[0]["apps"].as_array().unwrap().len(), 2, "{report}");
    let analysed = figures["figures"]["groups"][0]["period_ms"]
        .as_f64()
        .expect("the analysed period");
    assert_eq!(
        group["period_ms"].as_f64(),
        Some(analysed),
        "served at the period the plan was analysed for: {report}"
    );
    assert!(
        report["periods_from"]
            .as_str()
            .is_some_and(|s| s.contains("as analysed")),
        "{report}"
    );
    let out = serve(&["--json", "--slo-multipliers", "1,2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sweep: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints only JSON");
    let periods: Vec<f64> = sweep
        .as_array()
        .expect("one report per multiplier")
        .iter()
        .map(|r| r["runs"][0]["groups"][0]["period_ms"].as_f64().unwrap())
        .collect();
    let base = analysed / 1.5;
    assert!(
        periods.len() == 2 && (periods[0] - base).abs() < 1e-9 && (periods[1] - 2.0 * base).abs() < 1e-9,
        "periods {periods:?} for base {base}"
    );
    let small = dir.join("w-small.toml");
    std::fs::write(
        &small,
        std::fs::read_to_string(w).unwrap().replace(
            "model = \"mb.onnx\"",
            "model = \"mb.onnx\"\ninput_shape = \"1,3,40,40\"",
        ),
    )
    .unwrap();
    let out = stretch(&[
        "serve",
        "--workload",
        small.to_str().unwrap(),
        "--runtime-config",
        rc,
        "--plan",
        plan.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("app 'mb': analysed with inputs") && err.contains("1x3x40x40"),
        "{err}"
    );
    for flag in [&["--policy", "heft"][..], &["--plot", "x.svg"]] {
        let out = serve(flag);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(&format!("{} does not apply with --plan", flag[0])),
            "{err}"
        );
    }
}
