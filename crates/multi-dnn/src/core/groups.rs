//! Model groups (Puzzle §2.2, §6.1): models that share one periodic input
//! (a camera frame) and are judged together by their makespan.
//!
//! ```toml
//! [[group]]
//! name = "camera"
//! period_multiplier = 1.0   # period = this × the base period (Puzzle §6.1); or period_ms = 33.3
//!
//! [[app]]
//! model = "face.onnx"
//! arrival = "group"
//! group = "camera"
//! ```
//!
//! A member's deadline is the group's period. The base period of a group
//! is Σ over its members of the fastest processor's isolated latency × the
//! number of groups × 1.1, so it is known only once latencies are:
//! [`crate::core::workload::Workload::resolve_groups`] sets it.

use crate::core::workload::{Arrival, Workload, WorkloadError};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupFile {
    name: String,
    period_ms: Option<f64>,
    period_multiplier: Option<f64>,
}

/// How a group's period is given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Period {
    Ms(f64),
    /// Times the group's base period.
    Multiplier(f64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub name: String,
    pub period: Period,
    /// The period in ms: set at load for [`Period::Ms`], by
    /// [`Workload::resolve_groups`] for a multiplier.
    pub period_ms: Option<f64>,
    /// The base period once resolved (ms).
    pub base_ms: Option<f64>,
}

/// Slack of the base period (Puzzle §6.1: ε = 0.1).
pub const EPSILON: f64 = 0.1;

/// The groups of a workload file, checked.
pub fn parse(files: Vec<GroupFile>, err: &dyn Fn(&str, String) -> WorkloadError) -> Result<Vec<Group>, WorkloadError> {
    let mut out: Vec<Group> = Vec::new();
    for (i, g) in files.into_iter().enumerate() {
        let key = |k: &str| format!("group[{i}].{k}");
        if out.iter().any(|x| x.name == g.name) {
            return Err(err(&key("name"), format!("'{}' is used twice", g.name)));
        }
        let positive = |k: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(err(&key(k), format!("must be a positive number, got {v}")))
            }
        };
        let period = match (g.period_ms, g.period_multiplier) {
            (Some(ms), None) => Period::Ms(positive("period_ms", ms)?),
            (None, Some(m)) => Period::Multiplier(positive("period_multiplier", m)?),
            _ => {
                return Err(err(
                    &key("period_ms"),
                    "give period_ms or period_multiplier (one of them)".into(),
                ));
            }
        };
        out.push(Group {
            name: g.name,
            period_ms: match period {
                Period::Ms(ms) => Some(ms),
                Period::Multiplier(_) => None,
            },
            base_ms: None,
            period,
        });
    }
    Ok(out)
}

/// The index of the group called `name`, or a message naming the declared ones.
pub fn index_of(groups: &[Group], name: &str) -> Result<usize, String> {
    groups.iter().position(|g| g.name == name).ok_or_else(|| {
        let known: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        format!("no [[group]] named '{name}' (declared: {})", known.join(", "))
    })
}

/// Puzzle's base period of a group whose members' fastest isolated
/// latencies are `fastest_ms`, among `n_groups` groups.
pub fn base_period_ms(fastest_ms: &[f64], n_groups: usize) -> f64 {
    fastest_ms.iter().sum::<f64>() * n_groups as f64 * (1.0 + EPSILON)
}

impl Workload {
    /// Members (app indices) of group `g`.
    pub fn group_members(&self, g: usize) -> Vec<usize> {
        (0..self.apps.len())
            .filter(|a| self.apps[*a].arrival == Arrival::Group { group: g })
            .collect()
    }

    /// Sets every group's base period from each app's fastest isolated
    /// latency (`fastest_ms[app]`), and the period of groups given by a
    /// multiplier. Fails naming the group when a member's latency is not finite.
    pub fn resolve_groups(&mut self, fastest_ms: &[f64]) -> Result<(), WorkloadError> {
        let n = self.groups.len();
        for g in 0..n {
            let members = self.group_members(g);
            let lat: Vec<f64> = members
                .iter()
                .map(|a| fastest_ms.get(*a).copied().unwrap_or(f64::NAN))
                .collect();
            if let Some(bad) = members.iter().zip(&lat).find(|(_, l)| !l.is_finite()) {
                return Err(WorkloadError {
                    file: self.file.clone(),
                    key: format!("group[{g}]"),
                    reason: format!(
                        "app '{}' has no finite latency on any processor",
                        self.apps[*bad.0].name
                    ),
                });
            }
            let base = base_period_ms(&lat, n);
            let group = &mut self.groups[g];
            group.base_ms = Some(base);
            if let Period::Multiplier(m) = group.period {
                group.period_ms = Some(m * base);
            }
        }
        Ok(())
    }

    /// Sets each group's base period to `bases_ms` (in group order, as a
    /// plan recorded them) and a multiplier group's period from it, as
    /// [`Workload::resolve_groups`] does from latencies.
    pub fn set_group_bases(&mut self, bases_ms: &[f64]) {
        for (group, base) in self.groups.iter_mut().zip(bases_ms) {
            group.base_ms = Some(*base);
            if let Period::Multiplier(m) = group.period {
                group.period_ms = Some(m * base);
            }
        }
    }

    /// The same workload with every group's period set to `m` × its base
    /// period (groups must be resolved).
    pub fn with_period_multiplier(&self, m: f64) -> Workload {
        let mut w = self.clone();
        for g in &mut w.groups {
            g.period = Period::Multiplier(m);
            g.period_ms = g.base_ms.map(|b| m * b);
        }
        w
    }

    /// The deadline of app `a` when it belongs to a resolved group: the period.
    pub fn group_deadline_ms(&self, a: usize) -> Option<f64> {
        match self.apps.get(a)?.arrival {
            Arrival::Group { group } => self.groups.get(group)?.period_ms,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::core::workload_file::parse;
    use std::path::PathBuf;

    fn dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
    }

    const TEXT: &str = r#"
requests = 20
[[group]]
name = "camera"
period_multiplier = 2
[[group]]
name = "mic"
period_ms = 50
[[app]]
model = "resnet18.onnx"
arrival = "group"
group = "camera"
[[app]]
model = "resnet18.onnx"
arrival = "group"
group = "camera"
[[app]]
model = "resnet18.onnx"
arrival = "group"
group = "mic"
"#;

    #[test]
    fn base_period_sums_the_fastest_latencies_with_slack() {
        let mut w = parse(TEXT, &dir(), "w.toml").unwrap();
        assert_eq!(w.group_members(0), [0, 1]);
        assert_eq!(w.groups[1].period_ms, Some(50.0));
        w.resolve_groups(&[3.0, 7.0, 5.0]).unwrap();
        let base = (3.0 + 7.0) * 2.0 * 1.1;
        assert!((w.groups[0].base_ms.unwrap() - base).abs() < 1e-9);
        assert!((w.group_deadline_ms(1).unwrap() - 2.0 * base).abs() < 1e-9);
        assert_eq!(w.group_deadline_ms(2), Some(50.0));
        let e = w.resolve_groups(&[3.0, f64::INFINITY, 5.0]).unwrap_err().to_string();
        assert!(e.contains("group[0]") && e.contains("app1"), "{e}");
    }

    #[test]
    fn group_errors_name_the_key() {
        for (edit, key) in [
            (TEXT.replace("group = \"mic\"", "group = \"radio\""), "app[2].group"),
            (TEXT.replace("period_ms = 50", "period_ms = -1"), "group[1].period_ms"),
            (TEXT.replace("period_ms = 50\n", ""), "group[1].period_ms"),
            (
                TEXT.replacen("arrival = \"group\"", "arrival = \"closed\"", 1),
                "app[0].group",
            ),
        ] {
            let e = parse(&edit, &dir(), "w.toml").unwrap_err().to_string();
            assert!(e.contains(key), "{key}: {e}");
        }
    }
}
