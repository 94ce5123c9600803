//! Each model group's figures over a run (Puzzle's groups): makespans
//! from the group's tick to its last member, mean, p50 and p90, QoE and
//! score, as values and as report lines.

use crate::core::report::RunLog;
use crate::core::workload::Workload;

/// Each model group's makespans and score in a run of `w` (empty
/// without groups).
pub fn group_text(w: &Workload, log: &RunLog) -> String {
    if w.groups.is_empty() {
        return String::new();
    }
    let o = crate::puzzle::evaluate::outcome_from_log(log, w);
    let names: Vec<String> = w.groups.iter().map(|g| g.name.clone()).collect();
    let mut out = format!(
        "model groups (makespan from the group's tick to its last member): score {:.3}\n",
        o.score()
    );
    for line in group_lines(&o, &names) {
        out += &line;
        out.push('\n');
    }
    out
}

/// One model group's makespans over a run, summarised.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GroupFigures {
    pub group: String,
    pub period_ms: f64,
    pub requests: usize,
    pub mean_makespan_ms: f64,
    pub p50_makespan_ms: f64,
    pub p90_makespan_ms: f64,
    pub qoe: f64,
    pub score: f64,
}

impl GroupFigures {
    /// Per group of `o` (named by `names`, in order).
    pub fn of(o: &crate::puzzle::evaluate::Outcome, names: &[String]) -> Vec<GroupFigures> {
        use crate::puzzle::score::{group_score, qoe};
        use graph_ir::stats::quantile_nan as quantile;
        o.makespans
            .iter()
            .zip(&o.periods_ms)
            .zip(names)
            .map(|((m, p), n)| GroupFigures {
                group: n.clone(),
                period_ms: *p,
                requests: m.len(),
                mean_makespan_ms: m.iter().sum::<f64>() / m.len().max(1) as f64,
                p50_makespan_ms: quantile(m, 0.5),
                p90_makespan_ms: quantile(m, 0.9),
                qoe: qoe(m, *p),
                score: group_score(m, *p),
            })
            .collect()
    }

    /// The figures as one report line.
    pub fn line(&self) -> String {
        format!(
            "  {:<12} period {:>8.2} ms  makespan mean {:>8.2}  p50 {:>8.2}  p90 {:>8.2} ms  QoE {:.3}  score {:.3}  ({} requests)",
            self.group,
            self.period_ms,
            self.mean_makespan_ms,
            self.p50_makespan_ms,
            self.p90_makespan_ms,
            self.qoe,
            self.score,
            self.requests
        )
    }
}

/// Per group: mean, p50 and p90 makespan, QoE and score, one line each.
pub fn group_lines(o: &crate::puzzle::evaluate::Outcome, names: &[String]) -> Vec<String> {
    GroupFigures::of(o, names).iter().map(GroupFigures::line).collect()
}
