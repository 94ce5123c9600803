//! Every profile under `configs/devices/` loads, validates, and every figure
//! in it names its source; a file another profile names for a CPU
//! (`per_cpu`) carries that profile's device name and loads in its place.

use predictor::{DeviceModel, DeviceProfile, LatencyModel};
use std::path::Path;

#[test]
fn every_device_profile_loads_with_sources() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/devices");
    let mut seen = 0;
    let mut variants = std::collections::HashMap::new();
    for entry in std::fs::read_dir(&dir).expect("configs/devices exists") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let p = DeviceProfile::load_exact(&path).unwrap_or_else(|e| panic!("{e}"));
            for (cpu, file) in &p.per_cpu {
                let stem = file.strip_suffix(".toml").expect("per_cpu names a .toml file");
                variants.insert(stem.to_string(), p.name.clone());
                let v = DeviceProfile::load_for_cpu(&path, cpu).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(v.resolved_from, Some(dir.join(file).display().to_string()));
            }
        }
    }
    for entry in std::fs::read_dir(&dir).expect("configs/devices exists") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let p = DeviceProfile::load_exact(&path).unwrap_or_else(|e| panic!("{e}"));
        DeviceProfile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let stem = path.file_stem().and_then(|s| s.to_str()).expect("name");
        let device = variants.get(stem).map_or(stem, String::as_str);
        assert_eq!(p.name, device, "{}: name must match the file name", path.display());
        for (name, proc_) in &p.processors {
            for f in [
                &proc_.peak_gflops,
                &proc_.bandwidth_gbs,
                &proc_.kernel_overhead_us,
                &proc_.efficiency,
            ] {
                assert!(
                    !f.source.trim().is_empty(),
                    "{}: processors.{name} has a figure without source",
                    path.display()
                );
            }
        }
        let model = DeviceModel::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(model.processors().len(), p.processors.len());
        seen += 1;
    }
    assert!(seen >= 2, "expected device profiles in {}", dir.display());
}
