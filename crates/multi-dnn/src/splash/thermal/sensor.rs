//! Where temperatures come from: the emulator where the machine has no
//! thermal sensors (no zones under `/sys/class/thermal`), or a real
//! device's thermal zones.

use crate::splash::thermal::emulator::ThermalEmulator;
use std::path::{Path, PathBuf};

/// Temperatures (°C), one per worker, read now.
pub trait TemperatureSensor {
    fn read_c(&mut self) -> Result<Vec<f64>, String>;
}

impl TemperatureSensor for ThermalEmulator {
    fn read_c(&mut self) -> Result<Vec<f64>, String> {
        Ok(self.temps().to_vec())
    }
}

/// Linux thermal zones (`/sys/class/thermal/thermal_zone*/{type,temp}`,
/// temp in millidegrees), one chosen per worker by its zone type.
#[derive(Clone, Debug)]
pub struct SysfsSensor {
    files: Vec<PathBuf>,
}

impl SysfsSensor {
    /// The zones under `root` (normally `/sys/class/thermal`) whose type is
    /// `types[i]` for worker `i`; the error names a type no zone has, or
    /// says that there are no zones at all.
    pub fn open(root: &Path, types: &[&str]) -> Result<SysfsSensor, String> {
        let mut zones: Vec<(String, PathBuf)> = Vec::new();
        let entries = std::fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
        for e in entries.flatten() {
            let dir = e.path();
            let is_zone = dir
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("thermal_zone"));
            if !is_zone {
                continue;
            }
            if let Ok(t) = std::fs::read_to_string(dir.join("type")) {
                zones.push((t.trim().to_string(), dir.join("temp")));
            }
        }
        if zones.is_empty() {
            return Err(format!(
                "{}: no thermal zones on this machine (use the emulator)",
                root.display()
            ));
        }
        zones.sort();
        let files = types
            .iter()
            .map(|t| {
                zones.iter().find(|z| z.0 == *t).map(|z| z.1.clone()).ok_or_else(|| {
                    let known: Vec<&str> = zones.iter().map(|z| z.0.as_str()).collect();
                    format!("no thermal zone of type '{t}' (zones: {})", known.join(", "))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(SysfsSensor { files })
    }
}

impl SysfsSensor {
    /// The zones `spec` names, and per worker its index among this
    /// sensor's readings (`None`: emulated).
    pub fn for_workers(
        spec: &crate::splash::thermal::profile::SensorSpec,
    ) -> Result<(SysfsSensor, Vec<Option<usize>>), String> {
        let types: Vec<&str> = spec.zones.iter().flatten().map(String::as_str).collect();
        let sensor = SysfsSensor::open(&spec.root, &types)?;
        let mut next = 0;
        let index = spec
            .zones
            .iter()
            .map(|z| {
                z.as_ref().map(|_| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        Ok((sensor, index))
    }
}

impl TemperatureSensor for SysfsSensor {
    fn read_c(&mut self) -> Result<Vec<f64>, String> {
        self.files
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
                text.trim()
                    .parse::<f64>()
                    .map(|m| m / 1e3)
                    .map_err(|_| format!("{}: '{}' is not a temperature", f.display(), text.trim()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::splash::thermal::emulator::illustrative_phone;

    #[test]
    fn reads_zones_by_type_and_names_what_is_missing() {
        let root = std::env::temp_dir().join(format!("stretch-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (i, (ty, milli)) in [("cpu-0-0", "47250"), ("gpu", "39100")].iter().enumerate() {
            let z = root.join(format!("thermal_zone{i}"));
            std::fs::create_dir_all(&z).unwrap();
            std::fs::write(z.join("type"), format!("{ty}\n")).unwrap();
            std::fs::write(z.join("temp"), format!("{milli}\n")).unwrap();
        }
        let mut s = SysfsSensor::open(&root, &["gpu", "cpu-0-0"]).unwrap();
        assert_eq!(s.read_c().unwrap(), vec![39.1, 47.25]);
        let e = SysfsSensor::open(&root, &["npu"]).unwrap_err();
        assert!(e.contains("no thermal zone of type 'npu'") && e.contains("gpu"), "{e}");
        std::fs::write(root.join("thermal_zone1/temp"), "hot").unwrap();
        assert!(s.read_c().unwrap_err().contains("'hot' is not a temperature"));
        let empty = root.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(
            SysfsSensor::open(&empty, &["gpu"])
                .unwrap_err()
                .contains("no thermal zones")
        );
        let mut emu = ThermalEmulator::new(illustrative_phone()).unwrap();
        assert_eq!(emu.read_c().unwrap(), vec![25.0; 4]);
        let _ = std::fs::remove_dir_all(&root);
    }
}
