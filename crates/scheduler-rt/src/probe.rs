//! Running a whole graph to look at its intermediate values: the graph is
//! compiled once (tract, one thread) with the asked values as its outputs,
//! and each batch's values are handed to a callback. Quantization
//! calibrates activation ranges this way.

use crate::error::RuntimeError;
use engine::{Engine, TractEngine};
use graph_ir::{Graph, Outlet};
use tract_core::prelude::{IntoTValue, TVec, Tensor};

/// Runs `g` on `samples` (`[S, ...]` row-major, each sample the volume of
/// the graph's one input divided by its batch), the input's batch at a
/// time (the last batch padded with its first sample), and calls
/// `seen(k, values)` with the f32 values of `values[k]` for the real
/// samples of each batch.
pub fn probe(
    g: &Graph,
    values: &[Outlet],
    samples: &[f32],
    mut seen: impl FnMut(usize, &[f32]),
) -> Result<(), RuntimeError> {
    let fail = |reason: String| RuntimeError::Probe {
        graph: g.name.clone(),
        reason,
    };
    let [input] = g.inputs() else {
        return Err(fail(format!("has {} inputs; probing feeds one", g.inputs().len())));
    };
    let fact = g.node(*input).outputs[0].clone();
    let batch = fact.shape.first().copied().unwrap_or(1).max(1);
    let volume = fact.volume() / batch;
    if volume == 0 || !samples.len().is_multiple_of(volume) {
        return Err(fail(format!(
            "{} values are not whole samples of {fact}",
            samples.len()
        )));
    }
    let compiled = compiled_probe(g, values).map_err(fail)?;
    let n = samples.len() / volume;
    let positions: Vec<usize> = (0..n).collect();
    for chunk in positions.chunks(batch) {
        let mut x = Vec::with_capacity(batch * volume);
        for k in 0..batch {
            let at = chunk.get(k).copied().unwrap_or(chunk[0]);
            x.extend_from_slice(&samples[at * volume..(at + 1) * volume]);
        }
        let t = Tensor::from_shape(&fact.shape, &x)
            .map_err(|e| fail(e.to_string()))?
            .into_tvalue();
        let outs = compiled.run(TVec::from_vec(vec![t])).map_err(|e| fail(e.reason()))?;
        each_f32(&outs, |k, view| seen(k, &view[..view.len() / batch * chunk.len()])).map_err(fail)?;
    }
    Ok(())
}

/// Runs `g` once on `inputs` (one tensor per graph input, in order, f32)
/// and calls `seen(k, values)` with the f32 values of `values[k]`.
pub fn probe_once(
    g: &Graph,
    values: &[Outlet],
    inputs: &[graph_ir::Tensor],
    seen: impl FnMut(usize, &[f32]),
) -> Result<(), RuntimeError> {
    let fail = |reason: String| RuntimeError::Probe {
        graph: g.name.clone(),
        reason,
    };
    if inputs.len() != g.inputs().len() {
        return Err(fail(format!("{} inputs given for {}", inputs.len(), g.inputs().len())));
    }
    let compiled = compiled_probe(g, values).map_err(fail)?;
    let mut feed = TVec::new();
    for (i, t) in inputs.iter().enumerate() {
        let v = t
            .to_f32_vec()
            .ok_or_else(|| fail(format!("input {i} ({}) is not f32 data", t.fact())))?;
        feed.push(
            Tensor::from_shape(t.shape(), &v)
                .map_err(|e| fail(e.to_string()))?
                .into_tvalue(),
        );
    }
    let outs = compiled.run(feed).map_err(|e| fail(e.reason()))?;
    each_f32(&outs, seen).map_err(fail)
}

/// Calls `seen(k, values)` with the f32 values of each of `outs`.
fn each_f32(outs: &[engine::Value], mut seen: impl FnMut(usize, &[f32])) -> Result<(), String> {
    for (k, o) in outs.iter().enumerate() {
        let array = o.to_plain_array_view::<f32>().map_err(|e| format!("value {k}: {e}"))?;
        let view = array.as_slice().ok_or_else(|| format!("value {k} is not contiguous"))?;
        seen(k, view);
    }
    Ok(())
}

/// `g` with `values` as its outputs, compiled on tract.
fn compiled_probe(g: &Graph, values: &[Outlet]) -> Result<Box<dyn engine::Compiled>, String> {
    let mut probe = g.clone();
    probe
        .set_outputs(
            values
                .iter()
                .enumerate()
                .map(|(i, o)| (format!("probe_{i}"), *o))
                .collect(),
        )
        .map_err(|e| e.to_string())?;
    probe.prune_dead();
    let onnx = graph_ir::onnx::export_bytes(&probe).map_err(|e| e.to_string())?;
    let tract = TractEngine::new(1).map_err(|e| e.reason())?;
    tract.compile(&onnx).map_err(|e| e.reason())
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::Builder;

    #[test]
    fn every_sample_reaches_the_callback_once() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[2, 1, 2, 2]).unwrap();
        let y = b.relu("relu", x).unwrap();
        let g = b.finish("y", y).unwrap();
        let relu = g.find("relu").unwrap().out(0);
        let samples: Vec<f32> = (0..12).map(|v| v as f32 - 6.0).collect();
        let mut got = Vec::new();
        probe(&g, &[relu], &samples, |k, v| {
            assert_eq!(k, 0);
            got.extend_from_slice(v);
        })
        .unwrap();
        let want: Vec<f32> = samples.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(got, want, "three samples in batches of two, the last padded");
    }
}
