//! Chrome trace JSON (chrome://tracing, Perfetto) of traced runs.

use scheduler_rt::Trace;

/// Events of `trace` offset by `offset_s`, as process `pid` named `label`:
/// a complete event per subgraph run (thread = its processor, also in
/// `args.processor`) and an instant event per move ("moved subgraph X from
/// P to Q (reason)").
pub fn events(trace: &Trace, pid: u32, label: &str, offset_s: f64) -> Vec<serde_json::Value> {
    let mut events = vec![serde_json::json!({
        "name": "process_name", "ph": "M", "pid": pid, "args": { "name": label },
    })];
    events.extend(trace.spans.iter().map(|s| {
        serde_json::json!({
            "name": s.subgraph, "cat": "subgraph", "ph": "X", "pid": pid, "tid": s.processor,
            "ts": (offset_s + s.start_s) * 1e6, "dur": (s.end_s - s.start_s) * 1e6,
            "args": { "processor": s.processor, "meeting_point": s.meeting_point },
        })
    }));
    events.extend(trace.moves.iter().map(|m| {
        serde_json::json!({
            "name": m.to_string(), "cat": "adaptation", "ph": "i", "s": "p", "pid": pid, "tid": m.to,
            "ts": (offset_s + m.at_s) * 1e6,
            "args": { "subgraph": m.subgraph, "from": m.from, "to": m.to, "reason": m.reason },
        })
    }));
    events
}

/// A trace file holding `events`.
pub fn document(events: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}
