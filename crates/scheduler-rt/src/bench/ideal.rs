//! The ideal of a branched model on its processors (a measure of
//! how close the runtime comes to what its plan allows): each subgraph
//! takes its own time from the sequential run on one core, and subgraphs
//! start as soon as the values they read exist and their processor is
//! free, with no cost between them. The same schedule laid with each
//! subgraph's median time in the branched runs themselves (the in-run
//! ideal) and each run's own ideal (the schedule laid with that run's own
//! times, whose median over the runs is the runs' ideal) split the measured
//! run over the ideal in three: the in-run ideal over the ideal is what
//! running beside each other (and with the idle cores' intra-op threads)
//! does to the subgraphs themselves; the runs' ideal over the in-run ideal
//! is what their spread costs (a meeting point waits for the slowest of its
//! branches in each run, which medians taken one by one do not see); the
//! measured median over the runs' ideal is what the runtime costs between
//! them (hand-offs, waiting, the critical path's idle gaps, the run's own
//! set-up).

use crate::{Partition, Trace};
use std::collections::HashMap;

/// Each subgraph's median duration in ms over `traces`, by name.
pub fn medians<'a>(traces: impl IntoIterator<Item = &'a Trace>) -> HashMap<String, f64> {
    let mut took: HashMap<String, Vec<f64>> = HashMap::new();
    for t in traces {
        for s in &t.spans {
            took.entry(s.subgraph.clone())
                .or_default()
                .push((s.end_s - s.start_s) * 1e3);
        }
    }
    took.into_iter()
        .map(|(name, d)| (name, graph_ir::stats::median_nan(&d)))
        .collect()
}

/// The ideal makespan in ms of `partition` (its subgraphs on their
/// processors) when every subgraph takes its time in `took` (by name);
/// `None` when a subgraph has none.
pub fn ideal_ms(partition: &Partition, took: &HashMap<String, f64>) -> Option<f64> {
    let mut producer = HashMap::new();
    for (i, s) in partition.subgraphs.iter().enumerate() {
        for o in &s.outputs {
            producer.insert(*o, i);
        }
    }
    let mut end = vec![0.0f64; partition.subgraphs.len()];
    let mut free: HashMap<&str, f64> = HashMap::new();
    for (i, s) in partition.subgraphs.iter().enumerate() {
        let d = *took.get(&s.name)?;
        let ready = s
            .inputs
            .iter()
            .filter_map(|o| producer.get(o))
            .map(|j| end[*j])
            .fold(0.0, f64::max);
        let start = ready.max(free.get(s.processor.as_str()).copied().unwrap_or(0.0));
        end[i] = start + d;
        free.insert(s.processor.as_str(), end[i]);
    }
    Some(end.iter().copied().fold(0.0, f64::max))
}

/// The median over `runs` of each run's ideal makespan of `partition`
/// laid with that run's own subgraph times; `None` when no run has every
/// subgraph.
pub fn runs_ideal_ms<'a>(partition: &Partition, runs: impl IntoIterator<Item = &'a Trace>) -> Option<f64> {
    let each: Vec<f64> = runs
        .into_iter()
        .filter_map(|t| ideal_ms(partition, &medians([t])))
        .collect();
    (!each.is_empty()).then(|| graph_ir::stats::median_nan(&each))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Span;

    fn trace(times: &[(&str, f64)]) -> Trace {
        let mut t = 0.0;
        Trace {
            spans: times
                .iter()
                .map(|(name, ms)| {
                    let s = Span {
                        subgraph: name.to_string(),
                        processor: "cpu0".into(),
                        start_s: t,
                        end_s: t + ms / 1e3,
                        meeting_point: false,
                    };
                    t += ms / 1e3;
                    s
                })
                .collect(),
            ..Trace::default()
        }
    }

    #[test]
    fn branches_overlap_and_a_processor_runs_one_subgraph_at_a_time() {
        let g = crate::testing::two_branch(8, 1).unwrap();
        let p = crate::partition(&g, "cpu0").unwrap();
        let names: Vec<&str> = p.subgraphs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), 4, "{names:?}");
        let runs = [
            trace(&[(names[0], 1.0), (names[1], 4.0), (names[2], 3.0), (names[3], 2.0)]),
            trace(&[(names[0], 1.2), (names[1], 4.4), (names[2], 2.0), (names[3], 2.0)]),
            trace(&[(names[0], 0.8), (names[1], 3.6), (names[2], 9.0), (names[3], 2.0)]),
        ];
        let ideal = ideal_ms(&p, &medians(&runs)).unwrap();
        assert!((ideal - (1.0 + 4.0 + 2.0)).abs() < 1e-9, "{ideal}");
        assert!(ideal_ms(&p, &medians(&runs[..0])).is_none());
        let each = runs_ideal_ms(&p, &runs).unwrap();
        assert!((each - (1.2 + 4.4 + 2.0)).abs() < 1e-9, "{each}");
    }

    #[test]
    fn each_run_waits_for_its_own_slowest_branch() {
        let g = crate::testing::two_branch(8, 1).unwrap();
        let p = crate::partition(&g, "cpu0").unwrap();
        let names: Vec<&str> = p.subgraphs.iter().map(|s| s.name.as_str()).collect();
        let runs = [
            trace(&[(names[0], 1.0), (names[1], 1.0), (names[2], 3.0), (names[3], 1.0)]),
            trace(&[(names[0], 1.0), (names[1], 3.0), (names[2], 1.0), (names[3], 1.0)]),
            trace(&[(names[0], 1.0), (names[1], 2.0), (names[2], 2.0), (names[3], 1.0)]),
        ];
        let by_medians = ideal_ms(&p, &medians(&runs)).unwrap();
        assert!((by_medians - 4.0).abs() < 1e-9, "{by_medians}");
        let each = runs_ideal_ms(&p, &runs).unwrap();
        assert!((each - 5.0).abs() < 1e-9, "{each}");
        assert!(runs_ideal_ms(&p, &runs[..0]).is_none());
    }
}
