//! `stretch simulate --thermal` (Splash): the Snapdragon 855 profile's
//! thermal figures against Splash Table 2.2, the Person Finder comparison
//! on a short run, and one clear error per bad input.

mod common;

use common::{repo, scratch, stretch, stretch_ok};
use multi_dnn::splash::thermal::ThermalEmulator;
use multi_dnn::splash::thermal::profile::thermal_params;
use predictor::DeviceProfile;

/// Splash Table 2.2: temperature increase running RetinaFace (°C).
const PAPER_RISE: [(&str, f64); 4] = [("cpu", 6.9), ("gpu", 1.9), ("dsp", 1.2), ("cloud", 0.4)];

#[test]
fn the_profile_reproduces_table_2_2_rises_and_their_order() {
    let path = repo().join("configs/devices/snapdragon855.toml");
    let profile = DeviceProfile::load(&path).unwrap();
    let names: Vec<String> = PAPER_RISE.iter().map(|(n, _)| n.to_string()).collect();
    let params = thermal_params("snapdragon855.toml", profile.thermal.as_ref(), &names).unwrap();
    let mut rises = Vec::new();
    for (w, (name, paper)) in PAPER_RISE.iter().enumerate() {
        let mut emu = ThermalEmulator::new(params.clone()).unwrap();
        let mut busy = vec![0.0; names.len()];
        busy[w] = 1.0;
        emu.advance(30_000.0, 1.0, &busy).unwrap();
        let rise = emu.temps()[w] - params.ambient_c;
        eprintln!(
            "{name}: 30 s of back-to-back RetinaFace alone raises it {rise:.2} °C (Splash Table 2.2: {paper} °C)"
        );
        // Idle power and the neighbours' coupling add to the calibrated
        // active share; the figure stays within 15% of the paper's.
        assert!((rise - paper).abs() <= 0.15 * paper, "{name}: {rise:.2} vs {paper}");
        rises.push(rise);
    }
    assert!(
        rises.windows(2).all(|p| p[0] > p[1]),
        "CPU > GPU > DSP > cloud: {rises:?}"
    );
}

#[test]
fn person_finder_compares_policies_by_time_to_throttle() {
    let out = stretch_ok(&[
        "simulate",
        "--thermal",
        "--workload",
        repo().join("configs/workloads/person_finder.toml").to_str().unwrap(),
        "--device",
        repo().join("configs/devices/snapdragon855.toml").to_str().unwrap(),
        "--duration-s",
        "20",
        "--json",
    ]);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    let labels: Vec<(String, bool)> = rows
        .iter()
        .map(|r| (r["policy"].as_str().unwrap().to_string(), r["cloud"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        labels,
        vec![
            ("heft".into(), false),
            ("heft".into(), true),
            ("min-heat".into(), true),
            ("max-weighted-ppt".into(), true)
        ]
    );
    for r in rows {
        assert!(r["completed"].as_u64().unwrap() > 500, "{r}");
        let workers = r["workers"].as_array().unwrap();
        let names: Vec<&str> = workers.iter().map(|w| w["name"].as_str().unwrap()).collect();
        if r["cloud"].as_bool().unwrap() {
            assert!(names.contains(&"cloud"), "{names:?}");
        } else {
            assert!(!names.contains(&"cloud"), "{names:?}");
        }
    }
    let cloud_share = |r: &serde_json::Value| {
        let ws = r["workers"].as_array().unwrap();
        let total: f64 = ws.iter().map(|w| w["inferences"].as_f64().unwrap()).sum();
        let cloud: f64 = ws
            .iter()
            .filter(|w| w["name"] == "cloud")
            .map(|w| w["inferences"].as_f64().unwrap())
            .sum();
        cloud / total
    };
    assert!(
        cloud_share(&rows[2]) > cloud_share(&rows[1]),
        "min-heat sends more to the cool cloud than HEFT does"
    );
}

#[test]
fn bad_thermal_inputs_fail_with_the_reason() {
    let dir = scratch("thermal_errors");
    let device = std::fs::read_to_string(repo().join("configs/devices/snapdragon855.toml")).unwrap();
    let workload = repo().join("configs/workloads/person_finder.toml");
    let w = workload.to_str().unwrap();
    let cut = device.find("[thermal.processors.dsp]").unwrap();
    let end = device[cut..].find("[thermal.processors.cloud]").unwrap() + cut;
    let no_dsp = dir.join("no_dsp.toml");
    std::fs::write(&no_dsp, format!("{}{}", &device[..cut], &device[end..])).unwrap();
    let no_cloud = dir.join("no_cloud.toml");
    std::fs::write(&no_cloud, &device[..device.find("[cloud]").unwrap()]).unwrap();
    let sd855 = repo().join("configs/devices/snapdragon855.toml");
    let host = repo().join("configs/devices/host.toml");
    let bad_cloud = dir.join("bad_cloud.toml");
    std::fs::write(
        &bad_cloud,
        device.replace("bandwidth_mbps = { value = 249.0", "bandwidth_mbps = { value = -1.0"),
    )
    .unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["--device", no_dsp.to_str().unwrap()],
            "no parameters for processor `dsp`",
        ),
        (
            &["--device", no_cloud.to_str().unwrap()],
            "needs the cloud worker, and the profile has no [cloud] section",
        ),
        (
            &["--device", bad_cloud.to_str().unwrap()],
            "[cloud]: bandwidth_mbps must be positive",
        ),
        (
            &["--device", sd855.to_str().unwrap(), "--compare", "heft,warm"],
            "unknown policy 'warm'",
        ),
        (&["--device", host.to_str().unwrap()], "no [thermal] section"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["simulate", "--thermal", "--workload", w, "--duration-s", "1"];
        args.extend_from_slice(extra);
        let out = stretch(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} should fail");
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
