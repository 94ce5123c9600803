//! What one run did, for traces and Gantt charts.

/// One subgraph execution of a traced run.
#[derive(Clone, Debug)]
pub struct Span {
    pub subgraph: String,
    pub processor: String,
    /// Seconds since the run started.
    pub start_s: f64,
    pub end_s: f64,
    /// Whether the subgraph starts at a meeting point (it waited for branches).
    pub meeting_point: bool,
}

/// A placement change the adaptation policy made at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Moved {
    pub subgraph: String,
    pub from: String,
    pub to: String,
    /// Seconds since the run started.
    pub at_s: f64,
    /// Why: `slow` (moved off a slowed processor), `probe` (trying the
    /// home processor again), `back` (home recovered, the probe stays),
    /// `still slow` (the probe failed, moved off again).
    pub reason: &'static str,
}

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "moved subgraph {} from {} to {} ({})",
            self.subgraph, self.from, self.to, self.reason
        )
    }
}

/// The spans of one run, in completion order, and the moves made after it.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub spans: Vec<Span>,
    pub moves: Vec<Moved>,
}

impl Trace {
    /// Idle time of each processor before a meeting point it runs:
    /// `(processor, from_s, to_s)` from the end of its previous span (or the
    /// run's start) to the meeting point's start, when positive.
    pub fn meeting_waits(&self) -> Vec<(String, f64, f64)> {
        let mut waits = Vec::new();
        for m in self.spans.iter().filter(|s| s.meeting_point) {
            let idle_from = self
                .spans
                .iter()
                .filter(|s| s.processor == m.processor && s.end_s <= m.start_s)
                .map(|s| s.end_s)
                .fold(0.0, f64::max);
            if m.start_s - idle_from > 1e-6 {
                waits.push((m.processor.clone(), idle_from, m.start_s));
            }
        }
        waits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(sg: &str, p: &str, a: f64, b: f64, mp: bool) -> Span {
        Span {
            subgraph: sg.into(),
            processor: p.into(),
            start_s: a,
            end_s: b,
            meeting_point: mp,
        }
    }

    #[test]
    fn waits_run_from_the_processors_last_span_to_the_meeting_point() {
        let t = Trace {
            spans: vec![
                span("stem", "cpu0", 0.0, 1.0, false),
                span("b0", "cpu0", 1.0, 2.0, false),
                span("b1", "cpu1", 1.0, 3.0, false),
                span("merge", "cpu0", 3.0, 4.0, true),
            ],
            moves: vec![],
        };
        assert_eq!(t.meeting_waits(), vec![("cpu0".to_string(), 2.0, 3.0)]);
    }
}
