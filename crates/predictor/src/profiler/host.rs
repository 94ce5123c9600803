//! Facts about the machine a profile was measured on, for provenance.

use serde::Serialize;
use std::time::{SystemTime, UNIX_EPOCH};

/// The host: CPU model and counts, OS release.
#[derive(Clone, Debug, Serialize)]
pub struct Host {
    /// `model name` of /proc/cpuinfo (`unknown` where it has none).
    pub cpu_model: String,
    /// Logical CPUs listed in /proc/cpuinfo (elsewhere: those this process may use).
    pub logical_cpus: usize,
    /// Kernel release (/proc/sys/kernel/osrelease), `unknown` elsewhere.
    pub os_release: String,
    /// SIMD extensions the engines' kernels choose between (`avx2`, `fma`, `avx512f`, `neon`).
    pub simd: Vec<&'static str>,
}

fn simd() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut found = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        for (name, on) in [
            ("avx", std::arch::is_x86_feature_detected!("avx")),
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("fma", std::arch::is_x86_feature_detected!("fma")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
        ] {
            if on {
                found.push(name);
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    if std::arch::is_aarch64_feature_detected!("neon") {
        found.push("neon");
    }
    found
}

impl Host {
    pub fn detect() -> Host {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Host {
            cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
            logical_cpus: match cpuinfo.lines().filter(|l| l.starts_with("processor")).count() {
                0 => std::thread::available_parallelism().map_or(0, |n| n.get()),
                n => n,
            },
            os_release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            simd: simd(),
        }
    }
}

/// This machine's CPU model as `/proc/cpuinfo` names it (`unknown` where it
/// cannot be read).
pub fn this_cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into())
}

/// The first `model name` (x86) or `Model`/`Hardware` (Arm) line of a cpuinfo text.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "Hardware"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    })
}

/// The current UTC time as RFC 3339 (`2025-01-31T12:00:00Z`).
pub fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// Seconds since the Unix epoch as an RFC 3339 UTC timestamp.
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400 + 3661), "2000-02-29T01:01:01Z");
        assert_eq!(rfc3339(1_735_689_599), "2024-12-31T23:59:59Z");
    }

    #[test]
    fn reads_the_cpu_model() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n";
        assert_eq!(cpu_model(text).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(
            cpu_model("Hardware\t: Qualcomm SM8150\n").as_deref(),
            Some("Qualcomm SM8150")
        );
        assert_eq!(cpu_model(""), None);
    }
}
