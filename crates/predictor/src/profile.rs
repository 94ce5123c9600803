//! Device profiles: the processors of a device, the figures the analytic
//! latency model needs for each, and the communication cost between them.
//! Every figure carries a `source` saying where it comes from.
//!
//! ```toml
//! name = "host"
//! description = "..."
//!
//! [processors.cpu0]
//! kind = "cpu"
//! peak_gflops = { value = 40.0, source = "measured: profiles/host.csv" }
//! bandwidth_gbs = { value = 10.0, source = "..." }
//! kernel_overhead_us = { value = 5.0, source = "..." }
//! efficiency = { value = 0.6, source = "..." }
//! half_efficiency_channels = { value = 0.0, source = "..." }   # optional
//! precision = "int8"                 # optional, see crate::precision
//! rated_precision = "fp32"
//! speedup.int8 = { value = 3.0, source = "..." }
//!
//! [[links]]
//! between = ["cpu0", "cpu1"]
//! latency_us = { value = 30.0, source = "..." }
//! bandwidth_gbs = { value = 8.0, source = "..." }
//! ```
//!
//! A profile measured on one CPU says little about another. A device file
//! may name the files of the same device measured on other CPUs:
//! `per_cpu = { "AMD EPYC" = "host-epyc.toml" }` (keys as `/proc/cpuinfo`
//! names the CPU, files relative to this one). [`DeviceProfile::load`] reads
//! the file named for the CPU it runs on, else this one.

use crate::precision::Precision;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ProfileError {
    #[error("{path}: cannot read device profile: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("device `{device}` has no processor `{name}`; it has: {available}")]
    UnknownProcessor {
        device: String,
        name: String,
        available: String,
    },
}

/// A number with where it came from (a measurement file, or a paper and table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub value: f64,
    pub source: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessorKind {
    Cpu,
    Gpu,
    Dsp,
    Npu,
}

/// What the analytic model knows about one processor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessorProfile {
    pub kind: ProcessorKind,
    /// Peak arithmetic throughput in GFLOP/s at the precision the processor runs.
    pub peak_gflops: Figure,
    /// Sustained memory bandwidth in GB/s.
    pub bandwidth_gbs: Figure,
    /// Fixed cost of launching one kernel, in microseconds.
    pub kernel_overhead_us: Figure,
    /// Fraction of peak reached by large, wide kernels (0, 1].
    pub efficiency: Figure,
    /// Output channels at which a kernel reaches half of `efficiency`
    /// (wide-operator preference of GPUs and DSPs, NN-Stretch Fig. 7); 0 or
    /// absent means efficiency does not depend on width.
    #[serde(default)]
    pub half_efficiency_channels: Option<Figure>,
    /// Throughput of depthwise convolutions relative to dense ones (0, 1];
    /// absent means 1.
    #[serde(default)]
    pub depthwise_efficiency: Option<Figure>,
    /// Fixed cost of running one subgraph (dispatch, synchronisation), in microseconds.
    #[serde(default)]
    pub subgraph_overhead_us: Option<Figure>,
    /// Fusion rules of this processor's engine, e.g. `conv+bn+act`; absent
    /// means the default rules.
    #[serde(default)]
    pub fusion: Option<Vec<String>>,
    /// Per-kernel regressors (`stretch fit` output), a path relative to the
    /// profile file; kernels of the classes they cover are predicted by them.
    #[serde(default)]
    pub regressors: Option<String>,
    /// In-model calibration of the kernel predictions
    /// ([`crate::calibration`]), a path relative to the profile file.
    #[serde(default)]
    pub calibration: Option<String>,
    /// Multi-DNN serving: the only operators this processor runs (ONNX op
    /// types, `DepthwiseConv` for depthwise convolutions); absent means all.
    #[serde(default)]
    pub supports: Option<Vec<String>>,
    /// Or: the operators it does not run.
    #[serde(default)]
    pub unsupported: Option<Vec<String>>,
    /// Where the operator lists come from.
    #[serde(default)]
    pub ops_source: Option<String>,
    /// Operator forms this processor's delegate lacks that `stretch export`
    /// rewrites into exact equivalents (one of [`LACKABLE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lacks: Option<Vec<String>>,
    /// The precision this processor runs at ([`crate::precision`]);
    /// absent means `rated_precision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// The precision `peak_gflops`, `bandwidth_gbs` and any regressors
    /// describe; absent means fp32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rated_precision: Option<Precision>,
    /// Compute throughput at other precisions, relative to the rated one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub speedup: BTreeMap<Precision, Figure>,
    /// Regressors fitted on kernels profiled at another precision
    /// (`stretch profile --precision P`, then `stretch fit`), paths
    /// relative to the profile file: the processor running P is priced by
    /// them rather than by `regressors` scaled by the analytic ratio.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub regressors_at: BTreeMap<Precision, String>,
}

/// Operator forms a processor may lack (`lacks`) that export rewrites.
pub const LACKABLE: [&str; 1] = ["GroupedConv"];

/// Communication cost between two processors: `latency + bytes / bandwidth`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    pub between: [String; 2],
    pub latency_us: Figure,
    pub bandwidth_gbs: Figure,
}

/// A device: named processors and the links between them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    pub name: String,
    pub description: String,
    pub processors: BTreeMap<String, ProcessorProfile>,
    #[serde(default)]
    pub links: Vec<Link>,
    /// Whole-model latencies measured on the device by others (a paper's
    /// table): `models.NAME.PROCESSOR = { value = ms, source = "..." }`.
    /// `simulate` scales its per-operator predictions of a workload app
    /// named NAME to these totals.
    #[serde(default)]
    pub models: BTreeMap<String, BTreeMap<String, Figure>>,
    /// The machine a profile measured on this kind of host describes; its
    /// figures say little about another CPU.
    #[serde(default)]
    pub measured_on: Option<MeasuredOn>,
    /// Files of this device measured on other CPUs: CPU model (as
    /// `/proc/cpuinfo` names it) to a profile file relative to this one,
    /// whose `measured_on.cpu` is that model.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_cpu: BTreeMap<String, String>,
    /// The file read when a `per_cpu` entry replaced the one asked for.
    #[serde(skip)]
    pub resolved_from: Option<String>,
    /// The thermal emulator's parameters per processor, read by
    /// `multi_dnn::splash::thermal::profile` (thermal runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal: Option<toml::Table>,
    /// A remote server a `cloud` worker offloads to, read by
    /// `multi_dnn::splash::thermal::profile` (thermal runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud: Option<toml::Table>,
}

/// Where and when a measured profile's figures were taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredOn {
    /// The CPU model as `/proc/cpuinfo` names it.
    pub cpu: String,
    /// The day of the measurement (YYYY-MM-DD).
    pub date: String,
    pub source: String,
}

impl DeviceProfile {
    /// A warning when the profile was measured on another CPU than `this_cpu`
    /// (the model name this machine reports), `None` when it matches or the
    /// profile does not say where it was measured.
    pub fn measured_elsewhere(&self, this_cpu: &str) -> Option<String> {
        let m = self.measured_on.as_ref()?;
        (m.cpu.trim() != this_cpu.trim()).then(|| {
            format!(
                "profile `{}` was measured on `{}` ({}) but this machine's CPU is `{this_cpu}`: its predictions describe that machine{}; measure this CPU with scripts/profile_host.sh (in a checkout of stretch), which adds it to the profile's per_cpu table",
                self.name,
                m.cpu,
                m.date,
                if self.per_cpu.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (it has files for {} only)",
                        self.per_cpu.keys().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
                    )
                }
            )
        })
    }

    /// Reads and validates a profile, the `per_cpu` file for this
    /// machine's CPU where `path` names one; errors name the file and the
    /// key at fault.
    pub fn load(path: impl AsRef<Path>) -> Result<DeviceProfile, ProfileError> {
        Self::load_for_cpu(path, &crate::profiler::host::this_cpu_model())
    }

    /// [`DeviceProfile::load`] on a machine whose CPU model is `this_cpu`.
    pub fn load_for_cpu(path: impl AsRef<Path>, this_cpu: &str) -> Result<DeviceProfile, ProfileError> {
        let path = path.as_ref();
        let asked = Self::load_exact(path)?;
        let Some(file) = asked.per_cpu.get(this_cpu.trim()) else {
            return Ok(asked);
        };
        let variant = path.parent().unwrap_or(Path::new("")).join(file);
        let mut chosen = Self::load_exact(&variant).map_err(|e| ProfileError::Invalid {
            path: path.display().to_string(),
            reason: format!("per_cpu.\"{}\" = \"{file}\": {e}", this_cpu.trim()),
        })?;
        let invalid = |reason: String| ProfileError::Invalid {
            path: variant.display().to_string(),
            reason,
        };
        if !chosen.per_cpu.is_empty() {
            return Err(invalid(format!(
                "named by {}'s per_cpu, so it cannot name further files in its own per_cpu",
                path.display()
            )));
        }
        match &chosen.measured_on {
            Some(m) if m.cpu.trim() == this_cpu.trim() => {}
            other => {
                return Err(invalid(format!(
                    "named by {}'s per_cpu for `{}`, but its measured_on.cpu is {}",
                    path.display(),
                    this_cpu.trim(),
                    other.as_ref().map_or("absent".to_string(), |m| format!("`{}`", m.cpu))
                )));
            }
        }
        chosen.resolved_from = Some(variant.display().to_string());
        Ok(chosen)
    }

    /// The file this profile was read from when it was loaded as `asked`:
    /// the `per_cpu` entry's where one replaced it, else `asked`.
    pub fn file_read<'a>(&'a self, asked: &'a Path) -> &'a Path {
        self.resolved_from.as_deref().map_or(asked, Path::new)
    }

    /// Reads and validates exactly the file at `path`, ignoring `per_cpu`.
    pub fn load_exact(path: impl AsRef<Path>) -> Result<DeviceProfile, ProfileError> {
        let path = path.as_ref();
        let label = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ProfileError::Io {
            path: label.clone(),
            error,
        })?;
        Self::parse(&text, &label)
    }

    /// Parses and validates profile text; `label` names its source in errors.
    pub fn parse(text: &str, label: &str) -> Result<DeviceProfile, ProfileError> {
        let profile: DeviceProfile = toml::from_str(text).map_err(|e| ProfileError::Parse {
            path: label.to_string(),
            message: e.to_string().split_whitespace().collect::<Vec<_>>().join(" "),
        })?;
        profile.validate(label)?;
        Ok(profile)
    }

    fn validate(&self, label: &str) -> Result<(), ProfileError> {
        let invalid = |reason: String| ProfileError::Invalid {
            path: label.to_string(),
            reason,
        };
        if self.processors.is_empty() {
            return Err(invalid("`processors` is empty".into()));
        }
        for (model, per) in &self.models {
            for (proc_name, f) in per {
                if !self.processors.contains_key(proc_name) {
                    return Err(invalid(format!(
                        "models.{model}.{proc_name}: no processor `{proc_name}`"
                    )));
                }
                if !(f.value.is_finite() && f.value > 0.0) {
                    return Err(invalid(format!(
                        "models.{model}.{proc_name} must be a positive ms figure, got {}",
                        f.value
                    )));
                }
            }
        }
        for (name, p) in &self.processors {
            let positive = [
                ("peak_gflops", &p.peak_gflops),
                ("bandwidth_gbs", &p.bandwidth_gbs),
                ("efficiency", &p.efficiency),
            ];
            for (key, f) in positive {
                if !(f.value > 0.0 && f.value.is_finite()) {
                    return Err(invalid(format!(
                        "processors.{name}.{key} must be positive, got {}",
                        f.value
                    )));
                }
            }
            if p.efficiency.value > 1.0 {
                return Err(invalid(format!(
                    "processors.{name}.efficiency must be at most 1, got {}",
                    p.efficiency.value
                )));
            }
            if let Some(d) = &p.depthwise_efficiency
                && !(d.value > 0.0 && d.value <= 1.0)
            {
                return Err(invalid(format!(
                    "processors.{name}.depthwise_efficiency must be in (0, 1], got {}",
                    d.value
                )));
            }
            if p.kernel_overhead_us.value < 0.0 {
                return Err(invalid(format!(
                    "processors.{name}.kernel_overhead_us must not be negative"
                )));
            }
            if let Some(reason) = p.precision_problem(name) {
                return Err(invalid(reason));
            }
            if let Some(l) = p.lacks.iter().flatten().find(|l| !LACKABLE.contains(&l.as_str())) {
                return Err(invalid(format!(
                    "processors.{name}.lacks names `{l}`; export can rewrite {}",
                    LACKABLE.join(", ")
                )));
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            for end in &l.between {
                if !self.processors.contains_key(end) {
                    return Err(invalid(format!("links[{i}].between names unknown processor `{end}`")));
                }
            }
            if l.bandwidth_gbs.value.is_nan() || l.bandwidth_gbs.value <= 0.0 || l.latency_us.value < 0.0 {
                return Err(invalid(format!(
                    "links[{i}]: bandwidth must be positive and latency not negative"
                )));
            }
        }
        Ok(())
    }

    /// The named processor, or an error listing the ones the device has.
    pub fn processor(&self, name: &str) -> Result<&ProcessorProfile, ProfileError> {
        self.processors.get(name).ok_or_else(|| ProfileError::UnknownProcessor {
            device: self.name.clone(),
            name: name.to_string(),
            available: self.processors.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    /// Milliseconds to move `bytes` from one processor to another (0 on the same one).
    pub fn comm_ms(&self, from: &str, to: &str, bytes: u64) -> Result<f64, ProfileError> {
        self.processor(from)?;
        self.processor(to)?;
        if from == to {
            return Ok(0.0);
        }
        let link = self
            .links
            .iter()
            .find(|l| (l.between[0] == from && l.between[1] == to) || (l.between[0] == to && l.between[1] == from));
        let Some(l) = link else {
            return Err(ProfileError::Invalid {
                path: self.name.clone(),
                reason: format!("no link between `{from}` and `{to}`"),
            });
        };
        Ok(l.latency_us.value / 1e3 + bytes as f64 / (l.bandwidth_gbs.value * 1e6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
name = "t"
description = "test"
[processors.cpu]
kind = "cpu"
peak_gflops = { value = 10.0, source = "test" }
bandwidth_gbs = { value = 5.0, source = "test" }
kernel_overhead_us = { value = 2.0, source = "test" }
efficiency = { value = 0.5, source = "test" }
[processors.gpu]
kind = "gpu"
peak_gflops = { value = 100.0, source = "test" }
bandwidth_gbs = { value = 20.0, source = "test" }
kernel_overhead_us = { value = 20.0, source = "test" }
efficiency = { value = 0.5, source = "test" }
[[links]]
between = ["cpu", "gpu"]
latency_us = { value = 1000.0, source = "test" }
bandwidth_gbs = { value = 1.0, source = "test" }
"#;

    #[test]
    fn warns_only_when_measured_on_another_cpu() {
        let unsaid = DeviceProfile::parse(OK, "t.toml").unwrap();
        assert_eq!(unsaid.measured_elsewhere("Intel Xeon"), None);
        let said = OK.replace(
            "description = \"test\"\n",
            "description = \"test\"\nmeasured_on = { cpu = \"AMD EPYC 7B13\", date = \"2026-11-22\", source = \"run.json\" }\n",
        );
        let p = DeviceProfile::parse(&said, "t.toml").unwrap();
        assert_eq!(p.measured_elsewhere("AMD EPYC 7B13"), None);
        let w = p.measured_elsewhere("Intel Xeon").unwrap();
        assert!(
            w.contains("AMD EPYC 7B13") && w.contains("Intel Xeon") && w.contains("2026-11-22"),
            "{w}"
        );
    }

    /// A profile naming the file of another CPU is replaced by it on that
    /// CPU only; a named file that is missing, measured on another CPU or
    /// naming files of its own is an error naming it.
    #[test]
    fn per_cpu_files_replace_the_profile_on_their_cpu() {
        let dir = std::env::temp_dir().join(format!("stretch-per-cpu-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let on = |cpu: &str| {
            OK.replace(
                "description = \"test\"\n",
                &format!("description = \"test\"\nmeasured_on = {{ cpu = \"{cpu}\", date = \"2026-11-26\", source = \"run.json\" }}\n"),
            )
        };
        let main = dir.join("host.toml");
        std::fs::write(
            &main,
            on("Intel Xeon").replace(
                "name = \"t\"",
                "name = \"t\"\nper_cpu = { \"AMD EPYC\" = \"epyc.toml\" }",
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("epyc.toml"),
            on("AMD EPYC").replace("value = 10.0", "value = 77.0"),
        )
        .unwrap();
        let xeon = DeviceProfile::load_for_cpu(&main, "Intel Xeon").unwrap();
        assert_eq!(
            (xeon.processors["cpu"].peak_gflops.value, xeon.resolved_from),
            (10.0, None)
        );
        let epyc = DeviceProfile::load_for_cpu(&main, "AMD EPYC").unwrap();
        assert_eq!(epyc.processors["cpu"].peak_gflops.value, 77.0);
        assert_eq!(
            epyc.resolved_from.as_deref(),
            Some(dir.join("epyc.toml").to_str().unwrap())
        );
        assert_eq!(epyc.measured_elsewhere("AMD EPYC"), None);
        let w = DeviceProfile::load_for_cpu(&main, "Some Arm SoC")
            .unwrap()
            .measured_elsewhere("Some Arm SoC")
            .unwrap();
        assert!(
            w.contains("`Intel Xeon`")
                && w.contains("files for `AMD EPYC` only")
                && w.contains("scripts/profile_host.sh"),
            "{w}"
        );
        assert_eq!(
            DeviceProfile::load_exact(&main).unwrap().processors["cpu"]
                .peak_gflops
                .value,
            10.0
        );

        std::fs::write(dir.join("epyc.toml"), on("AMD EPYC 9000")).unwrap();
        let e = DeviceProfile::load_for_cpu(&main, "AMD EPYC").unwrap_err().to_string();
        assert!(
            e.contains("epyc.toml") && e.contains("measured_on.cpu is `AMD EPYC 9000`"),
            "{e}"
        );
        std::fs::write(
            dir.join("epyc.toml"),
            on("AMD EPYC").replace("name = \"t\"", "name = \"t\"\nper_cpu = { \"x\" = \"y.toml\" }"),
        )
        .unwrap();
        let e = DeviceProfile::load_for_cpu(&main, "AMD EPYC").unwrap_err().to_string();
        assert!(e.contains("cannot name further files"), "{e}");
        std::fs::remove_file(dir.join("epyc.toml")).unwrap();
        let e = DeviceProfile::load_for_cpu(&main, "AMD EPYC").unwrap_err().to_string();
        assert!(
            e.contains("host.toml") && e.contains("per_cpu.\"AMD EPYC\" = \"epyc.toml\""),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn communication_cost() {
        let p = DeviceProfile::parse(OK, "t.toml").unwrap();
        assert_eq!(p.comm_ms("cpu", "cpu", 1 << 20).unwrap(), 0.0);
        let ms = p.comm_ms("gpu", "cpu", 1_000_000).unwrap();
        assert!((ms - 2.0).abs() < 1e-9, "{ms}");
    }

    #[test]
    fn errors_name_file_and_key() {
        let missing = OK.replace(
            "efficiency = { value = 0.5, source = \"test\" }\n[processors.gpu]",
            "[processors.gpu]",
        );
        let e = DeviceProfile::parse(&missing, "dev.toml").unwrap_err().to_string();
        assert!(e.starts_with("dev.toml:") && e.contains("efficiency"), "{e}");
        let typo = OK.replacen("peak_gflops", "peak_gflop", 1);
        let e = DeviceProfile::parse(&typo, "dev.toml").unwrap_err().to_string();
        assert!(e.contains("peak_gflop"), "{e}");
        let wrong_type = OK.replacen("value = 10.0", "value = \"fast\"", 1);
        let e = DeviceProfile::parse(&wrong_type, "dev.toml").unwrap_err().to_string();
        assert!(e.contains("dev.toml") && e.contains("value"), "{e}");
        let p = DeviceProfile::parse(OK, "dev.toml").unwrap();
        let e = p.processor("dsp").unwrap_err().to_string();
        assert!(e.contains("cpu, gpu"), "{e}");
    }
}
