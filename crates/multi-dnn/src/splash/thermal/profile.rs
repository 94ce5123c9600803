//! The `[thermal]` and `[cloud]` sections of a device profile: the thermal
//! emulator's parameters per processor (with their source) and the remote
//! server a cloud worker offloads to.
//!
//! ```toml
//! [thermal]
//! ambient_c = 25.0
//! source = "where the figures come from"
//! couplings = [{ between = ["cpu", "gpu"], w_per_c = 0.05 }]
//!
//! [thermal.processors.cpu]
//! capacitance_j_per_c = 2.0
//! resistance_c_per_w = 12.0
//! idle_w = 0.05
//! active_w = 4.5
//! throttle = { kind = "slow", above_c = 49, release_c = 47, frequency = 0.6 }
//! zone = "cpu-thermal"             # optional: read this thermal zone instead
//!
//! [thermal.sensor]                 # optional: where zones are read
//! kind = "sysfs"
//! root = "/sys/class/thermal"      # default
//!
//! [cloud]                          # a `cloud` worker; its node above is the modem
//! rtt_ms = { value = 4.0, source = "..." }
//! bandwidth_mbps = { value = 249.0, source = "..." }
//! server_gflops = { value = 2000.0, source = "..." }
//! server_overhead_ms = { value = 1.0, source = "..." }
//! bytes_per_value = { value = 1.0, source = "..." }   # on the wire; default 4 (float32)
//! ```

use crate::splash::thermal::emulator::{NodeParams, ThermalParams, Throttle};
use serde::Deserialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// The worker name a `[cloud]` section adds.
pub const CLOUD: &str = "cloud";

#[derive(Debug, Error, PartialEq)]
pub enum ThermalProfileError {
    #[error("{file}: [{section}]: {reason}")]
    Malformed {
        file: String,
        section: &'static str,
        reason: String,
    },
    #[error("{file}: [thermal] has no parameters for processor `{processor}` (add [thermal.processors.{processor}])")]
    MissingProcessor { file: String, processor: String },
    #[error("{file}: [thermal.processors.{processor}] names no processor of this device (processors: {known})")]
    UnknownProcessor {
        file: String,
        processor: String,
        known: String,
    },
    #[error("{file}: [thermal]: {error}")]
    Invalid {
        file: String,
        error: crate::splash::thermal::emulator::ThermalError,
    },
    #[error(
        "{file}: the device profile has no [thermal] section: thermal runs need one (see configs/devices/snapdragon855.toml)"
    )]
    NoSection { file: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    ambient_c: f64,
    source: String,
    #[serde(default)]
    couplings: Vec<Coupling>,
    processors: BTreeMap<String, Node>,
    #[serde(default)]
    sensor: Option<SensorSection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SensorSection {
    kind: String,
    #[serde(default)]
    root: Option<std::path::PathBuf>,
}

/// Where a run reads real temperatures: Linux thermal zones under `root`,
/// the zone type per worker (`None`: that worker stays emulated).
#[derive(Clone, Debug, PartialEq)]
pub struct SensorSpec {
    pub root: std::path::PathBuf,
    pub zones: Vec<Option<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Coupling {
    between: [String; 2],
    w_per_c: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Node {
    capacitance_j_per_c: f64,
    resistance_c_per_w: f64,
    idle_w: f64,
    active_w: f64,
    #[serde(default)]
    throttle: Option<Throttle>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    zone: Option<String>,
}

/// A figure and where it comes from.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Sourced {
    pub value: f64,
    pub source: String,
}

/// The server behind the cloud worker: a request takes
/// `rtt + (bytes in + bytes out) · 8 / bandwidth + flops / server speed + overhead`,
/// the bytes counted at `bytes_per_value` per tensor element.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CloudSpec {
    pub rtt_ms: Sourced,
    pub bandwidth_mbps: Sourced,
    pub server_gflops: Sourced,
    pub server_overhead_ms: Sourced,
    /// Bytes each tensor element takes on the wire; absent: 4 (float32).
    #[serde(default)]
    pub bytes_per_value: Option<Sourced>,
}

impl CloudSpec {
    /// Expected ms of a request moving tensors of `f32_bytes` (both ways,
    /// 4 bytes per element) and computing `flops` on the server, over a
    /// link of `mbps` (the section's bandwidth when `None`).
    pub fn latency_ms(&self, f32_bytes: u64, flops: u64, mbps: Option<f64>) -> f64 {
        let mbps = mbps.unwrap_or(self.bandwidth_mbps.value);
        let per_value = self.bytes_per_value.as_ref().map_or(4.0, |b| b.value);
        let bytes = f32_bytes as f64 / 4.0 * per_value;
        self.rtt_ms.value
            + bytes * 8.0 / (mbps * 1e3)
            + flops as f64 / (self.server_gflops.value * 1e6)
            + self.server_overhead_ms.value
    }
}

/// The thermal parameters of `workers` (in that order) from a profile's
/// `[thermal]` table; every worker needs a node and every node but
/// [`CLOUD`]'s (the modem, unused in a run without the cloud) a worker.
pub fn thermal_params(
    file: &str,
    table: Option<&toml::Table>,
    workers: &[String],
) -> Result<ThermalParams, ThermalProfileError> {
    let table = table.ok_or_else(|| ThermalProfileError::NoSection { file: file.into() })?;
    let s = section(file, table)?;
    for name in s.processors.keys() {
        if !workers.contains(name) && name != CLOUD {
            return Err(ThermalProfileError::UnknownProcessor {
                file: file.into(),
                processor: name.clone(),
                known: workers.join(", "),
            });
        }
    }
    let mut nodes = Vec::with_capacity(workers.len());
    for w in workers {
        let n = s
            .processors
            .get(w)
            .ok_or_else(|| ThermalProfileError::MissingProcessor {
                file: file.into(),
                processor: w.clone(),
            })?;
        nodes.push(NodeParams {
            name: w.clone(),
            capacitance_j_per_c: n.capacitance_j_per_c,
            resistance_c_per_w: n.resistance_c_per_w,
            idle_w: n.idle_w,
            active_w: n.active_w,
            throttle: n.throttle,
        });
    }
    let mut couplings = Vec::new();
    for c in &s.couplings {
        let at = |n: &String| workers.iter().position(|w| w == n);
        // A coupling to a processor this run leaves out (the cloud's modem
        // without a cloud worker) has nothing to couple.
        if let (Some(i), Some(j)) = (at(&c.between[0]), at(&c.between[1])) {
            couplings.push((i, j, c.w_per_c));
        } else if !s.processors.contains_key(&c.between[0]) || !s.processors.contains_key(&c.between[1]) {
            return Err(ThermalProfileError::Malformed {
                file: file.into(),
                section: "thermal",
                reason: format!("coupling {:?} names a processor without a node", c.between),
            });
        }
    }
    let sources: Vec<String> = s
        .processors
        .iter()
        .filter(|(n, _)| workers.contains(n))
        .filter_map(|(n, p)| p.source.as_ref().map(|src| format!("{n}: {src}")))
        .collect();
    let params = ThermalParams {
        ambient_c: s.ambient_c,
        nodes,
        couplings,
        source: if sources.is_empty() {
            s.source
        } else {
            format!("{}; {}", s.source, sources.join("; "))
        },
    };
    params.validate().map_err(|error| ThermalProfileError::Invalid {
        file: file.into(),
        error,
    })?;
    Ok(params)
}

/// The `[thermal]` table read as a section; the error is the parser's reason.
fn section(file: &str, table: &toml::Table) -> Result<Section, ThermalProfileError> {
    table
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| ThermalProfileError::Malformed {
            file: file.into(),
            section: "thermal",
            reason: e.message().to_string(),
        })
}

/// The `[thermal.sensor]` section with each worker's `zone`, if there is
/// one; a zone without a sensor section, an unknown sensor kind, or a
/// sensor no worker has a zone for is an error naming the key.
pub fn sensor_spec(
    file: &str,
    table: Option<&toml::Table>,
    workers: &[String],
) -> Result<Option<SensorSpec>, ThermalProfileError> {
    let Some(table) = table else { return Ok(None) };
    let malformed = |reason: String| ThermalProfileError::Malformed {
        file: file.into(),
        section: "thermal",
        reason,
    };
    let s = section(file, table)?;
    let zones: Vec<Option<String>> = workers
        .iter()
        .map(|w| s.processors.get(w).and_then(|n| n.zone.clone()))
        .collect();
    let Some(sensor) = s.sensor else {
        if let Some((w, _)) = workers.iter().zip(&zones).find(|(_, z)| z.is_some()) {
            return Err(malformed(format!(
                "processor `{w}` names a zone but there is no [thermal.sensor] section (kind = \"sysfs\")"
            )));
        }
        return Ok(None);
    };
    if sensor.kind != "sysfs" {
        return Err(malformed(format!(
            "sensor kind `{}` is not known (known: sysfs)",
            sensor.kind
        )));
    }
    if zones.iter().all(Option::is_none) {
        return Err(malformed(
            "[thermal.sensor] is given but no processor of this run names a `zone`".into(),
        ));
    }
    Ok(Some(SensorSpec {
        root: sensor.root.unwrap_or_else(|| "/sys/class/thermal".into()),
        zones,
    }))
}

/// The `[cloud]` section, if the profile has one.
pub fn cloud_spec(file: &str, table: Option<&toml::Table>) -> Result<Option<CloudSpec>, ThermalProfileError> {
    let Some(t) = table else { return Ok(None) };
    let spec: CloudSpec = t
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| ThermalProfileError::Malformed {
            file: file.into(),
            section: "cloud",
            reason: e.message().to_string(),
        })?;
    for (key, v) in [
        ("bandwidth_mbps", spec.bandwidth_mbps.value),
        ("server_gflops", spec.server_gflops.value),
        (
            "bytes_per_value",
            spec.bytes_per_value.as_ref().map_or(4.0, |b| b.value),
        ),
    ] {
        if !(v > 0.0 && v.is_finite()) {
            return Err(ThermalProfileError::Malformed {
                file: file.into(),
                section: "cloud",
                reason: format!("{key} must be positive, got {v}"),
            });
        }
    }
    for (key, v) in [
        ("rtt_ms", spec.rtt_ms.value),
        ("server_overhead_ms", spec.server_overhead_ms.value),
    ] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(ThermalProfileError::Malformed {
                file: file.into(),
                section: "cloud",
                reason: format!("{key} must be non-negative, got {v}"),
            });
        }
    }
    Ok(Some(spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse::<toml::Table>().unwrap()
    }

    const TWO: &str = r#"
ambient_c = 25.0
source = "test"
couplings = [{ between = ["cpu", "gpu"], w_per_c = 0.05 }, { between = ["cpu", "cloud"], w_per_c = 0.01 }]
[processors.cpu]
capacitance_j_per_c = 2.0
resistance_c_per_w = 12.0
idle_w = 0.05
active_w = 4.5
throttle = { kind = "slow", above_c = 49, release_c = 47, frequency = 0.6 }
[processors.gpu]
capacitance_j_per_c = 2.0
resistance_c_per_w = 12.0
idle_w = 0.05
active_w = 1.5
source = "gpu figures"
[processors.cloud]
capacitance_j_per_c = 1.0
resistance_c_per_w = 10.0
idle_w = 0.0
active_w = 0.3
"#;

    #[test]
    fn nodes_follow_the_workers_and_couplings_to_absent_ones_drop() {
        let names: Vec<String> = ["gpu", "cpu"].map(String::from).to_vec();
        let mut t = table(TWO);
        t.insert("processors".into(), {
            let mut p = t["processors"].as_table().unwrap().clone();
            p.remove("cloud");
            toml::Value::Table(p)
        });
        t.insert(
            "couplings".into(),
            table("c = [{ between = [\"cpu\", \"gpu\"], w_per_c = 0.05 }]")["c"].clone(),
        );
        let p = thermal_params("d.toml", Some(&t), &names).unwrap();
        assert_eq!(p.nodes[0].name, "gpu");
        assert_eq!(p.couplings, vec![(1, 0, 0.05)]);
        assert!(p.source.contains("gpu: gpu figures"), "{}", p.source);
        let with_cloud: Vec<String> = ["cpu", "gpu", "cloud"].map(String::from).to_vec();
        let p = thermal_params("d.toml", Some(&table(TWO)), &with_cloud).unwrap();
        assert_eq!(p.couplings, vec![(0, 1, 0.05), (0, 2, 0.01)]);
    }

    #[test]
    fn sensor_zones_are_checked_and_named() {
        let names: Vec<String> = ["cpu", "gpu"].map(String::from).to_vec();
        assert_eq!(sensor_spec("d.toml", Some(&table(TWO)), &names), Ok(None));
        let mut t = table(TWO);
        t["processors"]["gpu"]
            .as_table_mut()
            .unwrap()
            .insert("zone".into(), "gpu-thermal".into());
        let e = sensor_spec("d.toml", Some(&t), &names).unwrap_err().to_string();
        assert!(e.contains("`gpu` names a zone but there is no [thermal.sensor]"), "{e}");
        t.insert("sensor".into(), table("kind = \"sysfs\"").into());
        let spec = sensor_spec("d.toml", Some(&t), &names).unwrap().unwrap();
        assert_eq!(spec.zones, vec![None, Some("gpu-thermal".to_string())]);
        assert_eq!(spec.root, std::path::PathBuf::from("/sys/class/thermal"));
        t.insert("sensor".into(), table("kind = \"acpi\"").into());
        let e = sensor_spec("d.toml", Some(&t), &names).unwrap_err().to_string();
        assert!(e.contains("sensor kind `acpi` is not known"), "{e}");
    }

    #[test]
    fn a_processor_without_parameters_is_named() {
        let names: Vec<String> = ["cpu", "gpu", "dsp"].map(String::from).to_vec();
        let e = thermal_params("d.toml", Some(&table(TWO)), &names).unwrap_err();
        assert!(e.to_string().contains("no parameters for processor `dsp`"), "{e}");
        let mut extra = table(TWO);
        let gpu = extra["processors"]["gpu"].clone();
        extra["processors"].as_table_mut().unwrap().insert("npu".into(), gpu);
        let e = thermal_params("d.toml", Some(&extra), &names[..2]).unwrap_err();
        assert!(
            e.to_string().contains("[thermal.processors.npu] names no processor"),
            "{e}"
        );
        let e = thermal_params("d.toml", None, &names).unwrap_err();
        assert!(e.to_string().contains("no [thermal] section"), "{e}");
        let e = thermal_params(
            "d.toml",
            Some(&table("ambient_c = 25\nsource = \"x\"\n[processors.cpu]\nidle_w = 1")),
            &names,
        )
        .unwrap_err();
        assert!(e.to_string().contains("missing field"), "{e}");
    }

    #[test]
    fn cloud_latency_adds_link_and_server() {
        let c = cloud_spec(
            "d.toml",
            Some(&table(
                "rtt_ms = { value = 4, source = \"a\" }\nbandwidth_mbps = { value = 100, source = \"b\" }\nserver_gflops = { value = 1000, source = \"c\" }\nserver_overhead_ms = { value = 1, source = \"d\" }",
            )),
        )
        .unwrap()
        .unwrap();
        // 125,000 bytes at 100 Mbit/s = 10 ms; 2 GFLOP at 1,000 GFLOP/s = 2 ms.
        assert!((c.latency_ms(125_000, 2_000_000_000, None) - 17.0).abs() < 1e-9);
        assert!((c.latency_ms(125_000, 0, Some(50.0)) - 25.0).abs() < 1e-9);
        let mut q = c.clone();
        q.bytes_per_value = Some(Sourced {
            value: 1.0,
            source: "int8".into(),
        });
        assert!(
            (q.latency_ms(500_000, 0, None) - 15.0).abs() < 1e-9,
            "a quarter of the bytes"
        );
        let e = cloud_spec("d.toml", Some(&table("rtt_ms = 4"))).unwrap_err();
        assert!(e.to_string().contains("[cloud]"), "{e}");
    }
}
