//! A run's log as a Chrome trace (chrome://tracing, Perfetto): one track
//! per processor, a slice per subgraph and rendered frame, and instant
//! events for dropped frames and outages.

use crate::core::report::RunLog;

/// A Chrome trace (chrome://tracing, Perfetto) of a run: one track per processor.
pub fn chrome_trace(log: &RunLog, names: &[String], apps: &[String], kind: &str) -> serde_json::Value {
    let events = trace_events(log, names, apps, 1);
    serde_json::json!({"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"kind": kind}})
}

/// The trace events of one run as Chrome-trace process `pid`.
fn trace_events(log: &RunLog, names: &[String], apps: &[String], pid: usize) -> Vec<serde_json::Value> {
    let mut events = Vec::new();
    for (i, n) in names.iter().enumerate() {
        events.push(serde_json::json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": i, "args": {"name": n}}));
    }
    for s in &log.spans {
        events.push(serde_json::json!({
            "name": format!("{}#{} c{}", apps.get(s.app).map_or("?", |a| a.as_str()), s.job, s.candidate),
            "cat": if s.counted { "subgraph" } else { "aborted by outage" },
            "ph": "X", "pid": pid, "tid": s.worker,
            "ts": s.start_ms * 1e3, "dur": (s.end_ms - s.start_ms) * 1e3,
            "args": {"app": s.app, "job": s.job, "candidate": s.candidate, "counted": s.counted},
        }));
    }
    for f in &log.frames {
        events.push(serde_json::json!({
            "name": "render", "cat": "render", "ph": "X", "pid": pid, "tid": f.worker,
            "ts": f.start_ms * 1e3, "dur": (f.end_ms - f.start_ms) * 1e3,
            "args": {"tick_ms": f.tick_ms, "late_ms": f.start_ms - f.tick_ms},
        }));
    }
    let render_worker = log.frames.first().map_or(0, |f| f.worker);
    for t in &log.dropped_frames {
        events.push(serde_json::json!({
            "name": "frame dropped", "cat": "render", "ph": "i", "s": "t", "pid": pid, "tid": render_worker, "ts": t * 1e3,
        }));
    }
    for o in &log.outages {
        let marks = std::iter::once(("went away", o.down_ms)).chain(o.up_ms.map(|u| ("came back", u)));
        for (what, at) in marks {
            events.push(serde_json::json!({
                "name": format!("{} {what}", names.get(o.worker).map_or("?", |n| n.as_str())),
                "cat": "outage", "ph": "i", "s": "g", "pid": pid, "tid": o.worker, "ts": at * 1e3,
            }));
        }
    }
    events
}

/// A Chrome trace of several runs, one process per run (named by its
/// label) with one track per processor.
pub fn chrome_trace_runs(
    runs: &[(String, &RunLog)],
    names: &[String],
    apps: &[String],
    kind: &str,
) -> serde_json::Value {
    let mut events = Vec::new();
    for (k, (label, log)) in runs.iter().enumerate() {
        let pid = k + 1;
        events.push(serde_json::json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}}));
        events.extend(trace_events(log, names, apps, pid));
    }
    serde_json::json!({"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"kind": kind}})
}
