//! `torch-io`: a graph as a PyTorch module and its weights as a
//! safetensors state dict ([`export`], `stretch export --format torch`),
//! and a state dict trained in PyTorch written back into the graph
//! ([`import_weights`], `stretch import-weights`), every node, name and
//! annotation kept.
//!
//! The module's layout ([`layout`]) follows the stage annotations:
//! `stem`, `stage{S}.branch_{processor}`, `stage{S}.merge`, `head` (`body`
//! for a model without them); its state-dict keys say where each tensor
//! lives (`stage2.branch_gpu.layer1_0_conv1.weight`). The weights file
//! carries the graph's structure fingerprint in its metadata, so weights
//! of another model are refused by name.

pub mod layout;
mod python;
pub mod safetensors;

use graph_ir::ops::Op;
use graph_ir::{DType, Graph, Tensor, keys};
use safetensors::{Data, Entry};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// The schema of `stretch-torch.json`.
pub const SCHEMA: &str = "stretch.torch/1";

/// The metadata key of the weights file holding the structure fingerprint.
pub const FINGERPRINT_KEY: &str = "stretch.fingerprint";

/// The generated module's class.
pub const CLASS: &str = "StretchModel";

/// Why a graph or a state dict cannot cross over.
#[derive(Debug, Error)]
pub enum TorchError {
    #[error("the graph: {0}")]
    Graph(String),
    #[error("node `{node}` ({op}): {reason}")]
    Unsupported { node: String, op: String, reason: String },
    #[error("constant `{constant}` is read by `{first}` and by `{second}`; a state dict holds each tensor once")]
    Shared {
        constant: String,
        first: String,
        second: String,
    },
    #[error(
        "constant `{constant}` has no values (a model written with --random-weights has weights; one with shapes only has none)"
    )]
    NoData { constant: String },
    #[error("{file}: {reason}")]
    Safetensors { file: String, reason: String },
    #[error("{file}: key `{key}`: {reason}")]
    Key { file: String, key: String, reason: String },
    #[error(
        "{file}: weights of a model of structure {found}, not this one ({expected}): a checkpoint of another model (the original for the branched one?)"
    )]
    Structure {
        file: String,
        found: String,
        expected: String,
    },
}

/// What `stretch export --format torch` writes.
pub struct Export {
    /// `model.py`.
    pub model_py: String,
    /// `weights.safetensors`.
    pub weights: Vec<u8>,
    /// `stretch-torch.json`.
    pub manifest: Value,
}

/// The suffix of the BatchNorm counter PyTorch keeps in a state dict; not
/// a tensor of the graph.
const BATCHES: &str = "num_batches_tracked";

/// The BatchNorm layers' counter keys of `layout`.
fn counters(g: &Graph, l: &layout::Layout) -> Vec<String> {
    l.keys
        .iter()
        .filter(|k| k.key.ends_with(".running_mean"))
        .filter(|k| matches!(g.node(g.consumers(k.node.out(0))[0].0).op, Op::BatchNorm(_)))
        .map(|k| format!("{}.{BATCHES}", k.key.trim_end_matches(".running_mean")))
        .collect()
}

/// `g` as a PyTorch module, its weights and the key map.
pub fn export(g: &Graph) -> Result<Export, TorchError> {
    let fingerprint = g
        .fingerprint()
        .ok_or_else(|| TorchError::Graph("it has a cycle".into()))?;
    let l = layout::layout(g)?;
    let model_py = python::model_py(g, &l, CLASS)?;
    let mut tensors = BTreeMap::new();
    let mut map = Vec::new();
    for k in &l.keys {
        let n = g.node(k.node);
        let Op::Const(t) = &n.op else {
            return Err(TorchError::Graph(format!("`{}` is not a constant", n.name)));
        };
        let values = t.to_f32_vec().ok_or_else(|| TorchError::NoData {
            constant: n.name.clone(),
        })?;
        tensors.insert(
            k.key.clone(),
            Entry {
                shape: k.shape.clone(),
                data: Data::F32(values),
            },
        );
        map.push(json!({"key": k.key, "initializer": n.name, "shape": k.shape, "role": k.role.as_str()}));
    }
    let ignored = counters(g, &l);
    for c in &ignored {
        tensors.insert(
            c.clone(),
            Entry {
                shape: vec![],
                data: Data::I64(vec![0]),
            },
        );
    }
    let metadata = BTreeMap::from([
        ("format".to_string(), "pt".to_string()),
        (FINGERPRINT_KEY.to_string(), fingerprint.clone()),
    ]);
    let facts = |ids: Vec<(String, Vec<usize>)>| -> Vec<Value> {
        ids.into_iter().map(|(n, s)| json!({"name": n, "shape": s})).collect()
    };
    let inputs = g
        .inputs()
        .iter()
        .map(|id| (g.node(*id).name.clone(), g.node(*id).outputs[0].shape.clone()))
        .collect();
    let outputs = g
        .outputs()
        .iter()
        .map(|(n, o)| (n.clone(), g.fact(*o).map(|f| f.shape.clone()).unwrap_or_default()))
        .collect();
    let normalisation = match (g.metadata.get(keys::INPUT_MEAN), g.metadata.get(keys::INPUT_STD)) {
        (Some(m), Some(s)) => json!({"mean": m, "std": s}),
        _ => Value::Null,
    };
    let manifest = json!({
        "schema": SCHEMA,
        "model": g.name,
        "fingerprint": fingerprint,
        "class": CLASS,
        "groups": l.groups,
        "inputs": facts(inputs),
        "outputs": facts(outputs),
        "normalisation": normalisation,
        "keys": map,
        "ignored_keys": ignored,
    });
    Ok(Export {
        model_py,
        weights: safetensors::write(&tensors, &metadata),
        manifest,
    })
}

/// `g` with the tensors of the safetensors file `bytes` (named `file`) as
/// its weights, and how many it wrote. Keys may carry DDP's `module.`
/// prefix; BatchNorm counters are ignored. A missing key, a key this model
/// has not, another shape, a value that is not finite, or a file whose
/// recorded structure differs is refused by name.
pub fn import_weights(g: &Graph, bytes: &[u8], file: &str) -> Result<(Graph, usize), TorchError> {
    let st = safetensors::read(bytes, file)?;
    let expected = g
        .fingerprint()
        .ok_or_else(|| TorchError::Graph("it has a cycle".into()))?;
    if let Some(found) = st.metadata.get(FINGERPRINT_KEY)
        && *found != expected
    {
        return Err(TorchError::Structure {
            file: file.to_string(),
            found: found.clone(),
            expected,
        });
    }
    let prefixed = !st.tensors.is_empty() && st.tensors.keys().all(|k| k.starts_with("module."));
    let tensors: BTreeMap<&str, &Entry> = st
        .tensors
        .iter()
        .map(|(k, v)| (if prefixed { &k["module.".len()..] } else { k.as_str() }, v))
        .collect();
    let l = layout::layout(g)?;
    let ignored: BTreeSet<String> = counters(g, &l).into_iter().collect();
    let known: BTreeSet<&str> = l.keys.iter().map(|k| k.key.as_str()).collect();
    let bad = |key: &str, reason: String| TorchError::Key {
        file: file.to_string(),
        key: key.to_string(),
        reason,
    };
    if let Some(extra) = tensors.keys().find(|k| !known.contains(*k) && !ignored.contains(**k)) {
        return Err(bad(extra, "is not a tensor of this model".into()));
    }
    let mut out = g.clone();
    for k in &l.keys {
        let e = tensors
            .get(k.key.as_str())
            .ok_or_else(|| bad(&k.key, "is missing".into()))?;
        if e.shape != k.shape {
            return Err(bad(&k.key, format!("has shape {:?}, the model {:?}", e.shape, k.shape)));
        }
        let Data::F32(values) = &e.data else {
            return Err(bad(&k.key, "holds integers, the model floats".into()));
        };
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(bad(&k.key, format!("holds {} at element {i}", values[i])));
        }
        let node = g.node(k.node);
        if !matches!(&node.op, Op::Const(t) if t.dtype() == DType::F32) {
            return Err(bad(&k.key, format!("`{}` is not a float32 constant", node.name)));
        }
        out.replace_op(k.node, Op::Const(Tensor::from_f32(k.shape.clone(), values)))
            .map_err(|e| TorchError::Graph(e.to_string()))?;
    }
    normalisation(&mut out, &st.metadata, file)?;
    out.check().map_err(|e| TorchError::Graph(e.to_string()))?;
    Ok((out, l.keys.len()))
}

/// Records in `g` the input normalisation the file's metadata holds (keys
/// [`keys::INPUT_MEAN`] and [`keys::INPUT_STD`], comma-separated, one value
/// per input channel, as `scripts/torch/train.py` writes them): the
/// normalisation the weights were trained with. Neither key: `g` keeps its
/// own. One key only, a value that is not a finite number, a standard
/// deviation that is not positive or another channel count is refused.
fn normalisation(g: &mut Graph, meta: &BTreeMap<String, String>, file: &str) -> Result<(), TorchError> {
    let bad = |reason: String| TorchError::Safetensors {
        file: file.to_string(),
        reason,
    };
    let (mean, std) = match (meta.get(keys::INPUT_MEAN), meta.get(keys::INPUT_STD)) {
        (None, None) => return Ok(()),
        (Some(m), Some(s)) => (m, s),
        (m, _) => {
            let (has, lacks) = if m.is_some() {
                (keys::INPUT_MEAN, keys::INPUT_STD)
            } else {
                (keys::INPUT_STD, keys::INPUT_MEAN)
            };
            return Err(bad(format!("metadata has `{has}` but not `{lacks}`")));
        }
    };
    let channels = g
        .inputs()
        .first()
        .and_then(|id| g.node(*id).outputs[0].shape.get(1).copied());
    let parse = |key: &str, text: &str| -> Result<Vec<f32>, TorchError> {
        let values = text
            .split(',')
            .map(|v| v.trim().parse::<f32>().ok().filter(|x| x.is_finite()))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| {
                bad(format!(
                    "metadata `{key}` is `{text}`, not finite numbers separated by commas"
                ))
            })?;
        if channels.is_some_and(|c| c != values.len()) {
            return Err(bad(format!(
                "metadata `{key}` has {} value(s) for a {}-channel input",
                values.len(),
                channels.unwrap_or(0)
            )));
        }
        Ok(values)
    };
    let (mean, std) = (parse(keys::INPUT_MEAN, mean)?, parse(keys::INPUT_STD, std)?);
    if let Some(v) = std.iter().find(|v| **v <= 0.0) {
        return Err(bad(format!(
            "metadata `{}` holds {v}, not a positive deviation",
            keys::INPUT_STD
        )));
    }
    g.set_input_normalisation(&mean, &std);
    Ok(())
}
