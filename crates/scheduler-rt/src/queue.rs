//! The GPU-style worker's in-order queue (paper §5, Algorithm 1 lines 14-19).
//!
//! A queue worker runs its jobs one after the other in submission order on
//! its own thread, so the scheduler may submit a subgraph before the
//! subgraphs it reads from have finished, as long as those were submitted to
//! the same queue earlier: such an input is a [`Input::Queued`] cell that the
//! earlier job fills before its completion is signalled. Submitting never
//! blocks; each job's completion comes back on the scheduler's reply channel.

use engine::Value;
use std::sync::{Arc, OnceLock};
use tract_core::prelude::TVec;

/// A value a job will hold when it runs.
#[derive(Clone)]
pub enum Input {
    /// Available at submission.
    Ready(Value),
    /// Filled by an earlier job of the same in-order queue.
    Queued(Cell),
}

/// A value produced on a queue, visible to the jobs queued after its producer.
pub type Cell = Arc<OnceLock<Value>>;

/// The job's input values; fails naming the input whose producer did not
/// fill its cell (that producer failed or was handed back unrun).
pub fn resolve(inputs: Vec<Input>) -> Result<TVec<Value>, String> {
    inputs
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            Input::Ready(v) => Ok(v),
            Input::Queued(c) => c
                .get()
                .cloned()
                .ok_or_else(|| format!("input {i} was not produced by the job queued before it")),
        })
        .collect()
}

/// Makes `outputs` visible to later jobs of the queue through `cells`.
pub fn publish(cells: &[Cell], outputs: &TVec<Value>) {
    for (c, v) in cells.iter().zip(outputs) {
        let _ = c.set(v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_core::prelude::{IntoTValue, Tensor, tvec};

    #[test]
    fn queued_inputs_resolve_once_published() {
        let cell: Cell = Arc::default();
        let v = Tensor::from(1f32).into_tvalue();
        let inputs = vec![Input::Ready(v.clone()), Input::Queued(cell.clone())];
        let e = resolve(inputs.clone()).unwrap_err();
        assert!(e.contains("input 1"), "{e}");
        publish(std::slice::from_ref(&cell), &tvec![v.clone()]);
        assert_eq!(resolve(inputs).unwrap().len(), 2);
    }
}
