//! CPU time the hypervisor ran other guests while this one wanted the CPU
//! ("steal", the eighth figure of each `cpu` line of `/proc/stat`). On a
//! shared virtual machine a timing taken while steal was high measures the
//! neighbours, not the code: measurements report it beside their figures.

use std::time::Instant;

use serde::Serialize;

/// Per CPU of `/proc/stat`: (name, steal ticks, all ticks).
type Sample = Vec<(String, u64, u64)>;

/// Parses the per-CPU lines (`cpu0`, `cpu1`, ...) of a `/proc/stat` text.
pub fn parse(stat: &str) -> Sample {
    stat.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?.to_string();
            let ticks: Vec<u64> = f.map_while(|x| x.parse().ok()).collect();
            let steal = *ticks.get(7)?;
            Some((name, steal, ticks.iter().take(8).sum()))
        })
        .collect()
}

/// A steal meter started at [`Meter::start`].
#[derive(Clone, Debug)]
pub struct Meter {
    at: Instant,
    start: Sample,
}

/// Steal over an interval. As JSON (every report that carries it):
/// `{"per_cpu": {"cpu0": SHARE, ...}, "seconds": S}`, shares from 0 to 1.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Steal {
    /// Per CPU: (name, share of its ticks stolen, 0 to 1).
    #[serde(serialize_with = "as_map")]
    pub per_cpu: Vec<(String, f64)>,
    pub seconds: f64,
}

fn as_map<S: serde::Serializer>(per_cpu: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(per_cpu.iter().map(|(n, v)| (n, v)))
}

impl Steal {
    /// The highest per-CPU share (0 when no CPU is listed).
    pub fn max(&self) -> f64 {
        self.per_cpu.iter().map(|c| c.1).fold(0.0, f64::max)
    }

    /// Adds a later interval: shares weighted by each interval's length.
    pub fn merge(&mut self, other: &Steal) {
        let total = self.seconds + other.seconds;
        if total <= 0.0 {
            return;
        }
        for (name, share) in &other.per_cpu {
            match self.per_cpu.iter_mut().find(|c| &c.0 == name) {
                Some(c) => c.1 = (c.1 * self.seconds + share * other.seconds) / total,
                None => self.per_cpu.push((name.clone(), *share)),
            }
        }
        self.seconds = total;
    }

    /// `stolen by the hypervisor: cpu0 12.0%, cpu1 3.1% of 15.2 s (/proc/stat)`.
    pub fn line(&self) -> String {
        let cpus: Vec<String> = self
            .per_cpu
            .iter()
            .map(|(n, s)| format!("{n} {:.1}%", 100.0 * s))
            .collect();
        format!(
            "CPU time stolen by the hypervisor: {} of {:.1} s (/proc/stat)",
            cpus.join(", "),
            self.seconds
        )
    }
}

/// Shares stolen between two samples, per CPU present in both (0 for a
/// CPU whose counters did not move).
pub fn between(a: &Sample, b: &Sample) -> Vec<(String, f64)> {
    b.iter()
        .filter_map(|(name, s1, t1)| {
            let (_, s0, t0) = a.iter().find(|x| &x.0 == name)?;
            let total = t1.saturating_sub(*t0);
            let stolen = s1.saturating_sub(*s0) as f64 / total.max(1) as f64;
            Some((name.clone(), stolen))
        })
        .collect()
}

impl Meter {
    /// Starts measuring; `None` where `/proc/stat` cannot be read.
    pub fn start() -> Option<Self> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        Some(Meter {
            at: Instant::now(),
            start: parse(&text),
        })
    }

    /// Steal since the start; `None` where `/proc/stat` cannot be read.
    pub fn read(&self) -> Option<Steal> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        Some(Steal {
            per_cpu: between(&self.start, &parse(&text)),
            seconds: self.at.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_cpu_steal_between_two_samples() {
        let a =
            parse("cpu  10 0 10 80 0 0 0 10 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 40 0 0 0 10 0 0\nintr 1 2\n");
        let b = parse("cpu  30 0 10 80 0 0 0 40 0 0\ncpu0 15 0 5 40 0 0 0 0 0 0\ncpu1 15 0 5 40 0 0 0 40 0 0\n");
        assert_eq!(a.len(), 2);
        let s = between(&a, &b);
        assert_eq!(s, vec![("cpu0".to_string(), 0.0), ("cpu1".to_string(), 0.75)]);
        let steal = Steal {
            per_cpu: s,
            seconds: 2.0,
        };
        assert_eq!(steal.max(), 0.75);
        assert!(steal.line().contains("cpu1 75.0%"), "{}", steal.line());
        let mut all = steal.clone();
        all.merge(&Steal {
            per_cpu: vec![("cpu0".into(), 0.3), ("cpu1".into(), 0.15)],
            seconds: 6.0,
        });
        assert_eq!(all.seconds, 8.0);
        assert!((all.per_cpu[0].1 - 0.225).abs() < 1e-12 && (all.per_cpu[1].1 - 0.3).abs() < 1e-12);
        assert_eq!(
            serde_json::to_string(&steal).unwrap(),
            r#"{"per_cpu":{"cpu0":0.0,"cpu1":0.75},"seconds":2.0}"#
        );
    }

    #[test]
    fn meter_reads_this_machine() {
        if let Some(m) = Meter::start() {
            let s = m.read().unwrap();
            assert!(!s.per_cpu.is_empty());
            assert!(s.per_cpu.iter().all(|c| (0.0..=1.0).contains(&c.1)));
        }
    }
}
