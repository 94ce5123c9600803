//! Folds a BatchNormalization into the convolution before it (the
//! convolution's output read by nothing else), as quantizers do first: a
//! quantized convolution then carries the normalisation in its int8
//! weights and int32 bias instead of leaving a float node between it and
//! its activation.

use crate::error::QuantizeError;
use graph_ir::{Graph, NodeId, Op, Patch, Tensor};

/// The folded graph and how many normalisations were folded. Folds are
/// applied one at a time, so a convolution reading a folded normalisation
/// reads the folded convolution in its turn.
pub fn fold_batch_norms(g: &Graph) -> Result<(Graph, usize), QuantizeError> {
    let mut out = g.clone();
    let mut folded = 0;
    while let Some(patch) = next_fold(&out)? {
        out.apply(patch)?;
        folded += 1;
    }
    Ok((out, folded))
}

/// The patch folding the first foldable normalisation, if any.
fn next_fold(g: &Graph) -> Result<Option<Patch>, QuantizeError> {
    for id in g.compute_order()? {
        let Some((conv, w, b, bn)) = foldable(g, id) else {
            continue;
        };
        let mut patch = Patch::new();
        let node = g.node(conv);
        let out_ch = w.shape()[0];
        let per = w.volume() / out_ch.max(1);
        let weights = w.to_f32_vec().unwrap_or_default();
        let bias = b.and_then(|t| t.to_f32_vec()).unwrap_or_else(|| vec![0.0; out_ch]);
        let [gamma, beta, mean, var] = bn.params;
        let mut nw = Vec::with_capacity(weights.len());
        let mut nb = Vec::with_capacity(out_ch);
        for c in 0..out_ch {
            let k = gamma[c] / (var[c] + bn.epsilon).sqrt();
            nw.extend(weights[c * per..(c + 1) * per].iter().map(|x| x * k));
            nb.push((bias[c] - mean[c]) * k + beta[c]);
        }
        let wc = patch.add_const(
            format!("{}.folded_weight", node.name),
            Tensor::from_f32(w.shape().to_vec(), &nw),
        );
        let bc = patch.add_const(format!("{}.folded_bias", node.name), Tensor::from_f32([out_ch], &nb));
        let new = patch.add_node(
            format!("{}.folded", node.name),
            node.op.clone(),
            vec![node.inputs[0].into(), wc, bc],
        );
        for (k, v) in &node.annotations {
            patch.annotate_new(new, k.clone(), v.clone());
        }
        patch.shunt(id.out(0), new.out(0));
        return Ok(Some(patch));
    }
    Ok(None)
}

struct Bn {
    params: [Vec<f32>; 4],
    epsilon: f32,
}

/// A BatchNormalization `id` reading a convolution's only use, with every
/// parameter a constant with data: (conv, weight, bias, normalisation).
fn foldable(g: &Graph, id: NodeId) -> Option<(NodeId, &Tensor, Option<&Tensor>, Bn)> {
    let node = g.node(id);
    let Op::BatchNorm(bn) = &node.op else {
        return None;
    };
    let x = node.inputs[0];
    let conv = g.node(x.node);
    if !matches!(conv.op, Op::Conv(_)) || g.consumers(x).len() != 1 || g.is_output(x) {
        return None;
    }
    let w = g.const_tensor(conv.inputs[1]).filter(|t| t.to_f32_vec().is_some())?;
    let b = match conv.inputs.get(2) {
        Some(o) => Some(g.const_tensor(*o).filter(|t| t.to_f32_vec().is_some())?),
        None => None,
    };
    let p: Vec<Vec<f32>> = node.inputs[1..5]
        .iter()
        .map(|o| g.const_tensor(*o).and_then(|t| t.to_f32_vec()))
        .collect::<Option<_>>()?;
    let out_ch = w.shape()[0];
    if p.iter().any(|v| v.len() != out_ch) {
        return None;
    }
    let params = [p[0].clone(), p[1].clone(), p[2].clone(), p[3].clone()];
    Some((
        x.node,
        w,
        b,
        Bn {
            params,
            epsilon: bn.epsilon,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::builder::{Builder, ConvSpec};

    #[test]
    fn chained_normalisations_all_fold() {
        let mut b = Builder::new("t");
        let x = b.input("x", &[1, 3, 6, 6]).unwrap();
        let y = b.conv("conv", x, ConvSpec::new(4, 3, 1)).unwrap();
        let y = b.batch_norm("bn", y).unwrap();
        let y = b.conv("conv2", y, ConvSpec::new(4, 1, 1)).unwrap();
        let y = b.batch_norm("bn2", y).unwrap();
        let mut g = b.finish("y", y).unwrap();
        g.fill_missing_weights(3);
        let (f, n) = fold_batch_norms(&g).unwrap();
        assert_eq!(n, 2);
        assert!(
            f.node_ids()
                .iter()
                .all(|id| !matches!(f.node(*id).op, Op::BatchNorm(_)))
        );
        f.check().unwrap();
    }
}
