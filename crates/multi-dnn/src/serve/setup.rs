//! What a render workload adds to a [`Server`]: every operator timed alone
//! on every worker (for Heimdall's chunker) and the rendering kernel,
//! calibrated on the worker that runs it.

use crate::core::report::quantile_or_zero;
use crate::core::units::operators;
use crate::heimdall::render_kernel::{ROWS, RenderKernel};
use crate::serve::{Server, random_tensor};
use engine::{Compiled, Value};
use graph_ir::Graph;
use scheduler_rt::error::RuntimeError;
use scheduler_rt::extract::extract_onnx;
use scheduler_rt::partition::subgraph_of;
use std::sync::Arc;
use tract_onnx::prelude::TVec;

/// Largest relative gap between the calibrated and asked frame time at
/// which [`Server::set_render`] stops early.
pub const CALIBRATION_TOLERANCE: f64 = 0.03;
/// Most calibration rounds of [`Server::set_render`].
pub const CALIBRATION_ROUNDS: usize = 6;

impl Server {
    /// Measures every operator of `graph` ([`crate::serve::units::operators`]
    /// order) alone on each worker: compiled on its own, run once to warm
    /// up, then the median of `runs` runs (ms), `result[worker][op]`.
    pub fn measure_operators(
        &self,
        graph: &Graph,
        runs: usize,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Vec<Vec<f64>>, RuntimeError> {
        let ops = operators(graph).map_err(|e| RuntimeError::Units {
            model: graph.name.clone(),
            reason: e.to_string(),
        })?;
        let mut out = vec![Vec::with_capacity(ops.len()); self.workers.len()];
        for (i, id) in ops.iter().enumerate() {
            progress(&format!(
                "model {}: timing operator {}/{}",
                graph.name,
                i + 1,
                ops.len()
            ));
            let sub = subgraph_of(graph, graph.node(*id).name.clone(), vec![*id]);
            let bytes = extract_onnx(graph, &sub)?;
            let inputs: TVec<Value> = sub
                .inputs
                .iter()
                .enumerate()
                .map(|(k, o)| {
                    let shape = graph.fact(*o).map(|f| f.shape.clone()).unwrap_or_default();
                    random_tensor(&shape, 31 + k as u64)
                })
                .collect::<Result<_, _>>()?;
            for (w, wk) in self.workers.iter().enumerate() {
                let comp: Arc<dyn Compiled> =
                    Arc::from(wk.engine.compile(&bytes).map_err(|e| RuntimeError::Compile {
                        engine: wk.engine.name(),
                        subgraph: format!("{}:{}", graph.name, sub.name),
                        processor: self.names[w].clone(),
                        reason: e.reason(),
                    })?);
                let mut times = Vec::with_capacity(runs);
                for k in 0..=runs {
                    let (_, ms) = self.run_compiled(w, &comp, &sub.name, inputs.clone())?;
                    if k > 0 {
                        times.push(ms);
                    }
                }
                out[w].push(quantile_or_zero(&times, 0.5));
            }
        }
        Ok(out)
    }

    /// Gives `worker` the rendering task's kernel, calibrated there to take
    /// about `render_ms` when run once per frame at `fps` (frames spaced as
    /// in a run, so that caches are as cold as they will be); returns the
    /// median of the last calibration frames (ms), which the run then
    /// expects a frame to take. Calibration stops once that median is
    /// within [`CALIBRATION_TOLERANCE`] of `render_ms`, or after
    /// [`CALIBRATION_ROUNDS`] rounds (the caller reports how far it is).
    pub fn set_render(&mut self, worker: usize, fps: f64, render_ms: f64) -> Result<f64, RuntimeError> {
        let period = std::time::Duration::from_secs_f64(1.0 / fps.max(1e-3));
        let frames = |server: &Server, kernel: &Arc<dyn Compiled>, n: usize| -> Result<Vec<f64>, RuntimeError> {
            let mut times = Vec::with_capacity(n);
            for _ in 0..n {
                let t = std::time::Instant::now();
                times.push(server.run_compiled(worker, kernel, "render", TVec::new())?.1);
                std::thread::sleep(period.saturating_sub(t.elapsed()));
            }
            Ok(times)
        };
        let probe: Arc<dyn Compiled> = Arc::new(RenderKernel::new(ROWS));
        let full = quantile_or_zero(&frames(self, &probe, 4)?[1..], 0.5).max(1e-3);
        let mut rows = ((render_ms / full) * ROWS as f64).round().max(1.0);
        let mut measured = full;
        let mut kernel: Arc<dyn Compiled> = probe;
        for _ in 0..CALIBRATION_ROUNDS {
            kernel = Arc::new(RenderKernel::new(rows as usize));
            measured = quantile_or_zero(&frames(self, &kernel, 10)?[3..], 0.5).max(1e-3);
            if (measured / render_ms - 1.0).abs() <= CALIBRATION_TOLERANCE {
                break;
            }
            rows = (rows * render_ms / measured).round().max(1.0);
        }
        self.render = Some((worker, kernel, measured));
        Ok(measured)
    }

    /// Gives this server the rendering task `other` calibrated (same
    /// worker, kernel and expected frame time), for servers started on the
    /// same processors; `None` when `other` has none.
    pub fn share_render(&mut self, other: &Server) -> Option<f64> {
        self.render = other.render.clone();
        self.render.as_ref().map(|r| r.2)
    }
}

/// Pins the calling thread to some cores until dropped, then gives it back
/// the cores it had.
pub(super) struct PinGuard(Option<engine::host::CoreSet>);

impl PinGuard {
    /// Pins to `cores` (nothing when `None` or when pinning fails: the run
    /// then goes on unpinned).
    pub(super) fn new(cores: Option<&engine::host::CoreSet>) -> PinGuard {
        let Some(cores) = cores else { return PinGuard(None) };
        let Ok(before) = engine::host::available() else {
            return PinGuard(None);
        };
        match engine::host::pin_current_thread(cores) {
            Ok(()) => PinGuard(Some(before)),
            Err(_) => PinGuard(None),
        }
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        if let Some(before) = &self.0 {
            let _ = engine::host::pin_current_thread(before);
        }
    }
}
