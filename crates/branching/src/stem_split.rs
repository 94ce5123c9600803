//! Splitting the stem across processors by output channels. The stem's
//! leading convolution and the channel-wise layers right after it (batch
//! norm, activations, pooling) become one piece per processor, each
//! computing a contiguous slice of the output channels with the
//! original's weights sliced, and a Concat on the primary processor puts
//! the slices back in order. The split graph computes the same function
//! as the original, so nothing is retrained for it; the stem, which no
//! branch covers, then runs on every processor at once. The plan search
//! splits when the slowest piece (hand-offs included) plus the Concat is
//! predicted faster than the whole stem on the primary processor.

use crate::branch::shares;
use crate::error::BranchError;
use crate::plan::StemShare;
use graph_ir::analysis::Segment;
use graph_ir::keys;
use graph_ir::ops::{Concat, Op};
use graph_ir::{Fact, Graph, NodeId, Outlet, Patch, PatchOutlet, Tensor};
use predictor::LatencyModel;
use std::collections::HashMap;

/// The splittable head of a stem: a convolution (not grouped, constant
/// weights) and the chain of channel-wise layers that alone read it.
#[derive(Clone, Debug)]
pub struct Chain {
    /// In order, the convolution first.
    pub nodes: Vec<NodeId>,
    /// The convolution's output channels.
    pub channels: usize,
    /// What the convolution reads.
    pub input: Outlet,
    /// The last layer's output.
    pub output: Outlet,
}

fn is_const(g: &Graph, o: Outlet) -> bool {
    matches!(g.node(o.node).op, Op::Const(_))
}

/// The stem's splittable chain, or `None` when it does not start with a
/// convolution of constant weights and a single group.
pub fn chain(g: &Graph, stem: &Segment) -> Option<Chain> {
    let computing = g.computing(stem.nodes.iter().copied());
    let first = *computing.first()?;
    let conv = g.node(first);
    match &conv.op {
        Op::Conv(c) if c.group == 1 && conv.inputs[1..].iter().all(|o| is_const(g, *o)) => {}
        _ => return None,
    }
    let channels = *g.fact(conv.inputs[1])?.shape.first()?;
    let outputs: Vec<Outlet> = g.outputs().iter().map(|(_, o)| *o).collect();
    let mut nodes = vec![first];
    let mut output = first.out(0);
    loop {
        let readers = g.consumers(output);
        if outputs.contains(&output) || readers.len() != 1 || readers[0].1 != 0 {
            break;
        }
        let next = readers[0].0;
        let node = g.node(next);
        let channel_wise = matches!(node.op, Op::BatchNorm(_) | Op::Unary(_) | Op::Pool(_));
        let operands = node.inputs[1..]
            .iter()
            .all(|o| is_const(g, *o) && per_channel(g, *o, channels));
        if !computing.contains(&next) || !channel_wise || !operands {
            break;
        }
        nodes.push(next);
        output = next.out(0);
    }
    Some(Chain {
        nodes,
        channels,
        input: conv.inputs[0],
        output,
    })
}

/// The constant `o` of `g` (without data when it has none).
fn weight(g: &Graph, o: Outlet) -> Tensor {
    g.const_tensor(o)
        .cloned()
        .unwrap_or_else(|| Tensor::without_data(g.fact(o).cloned().unwrap_or_else(|| Fact::f32(vec![0]))))
}

/// Rows `from..to` of `t` along its first axis (no data in, none out);
/// a tensor of one value (a scalar operand such as a clip bound) is kept
/// whole.
fn rows(t: &Tensor, from: usize, to: usize) -> Result<Tensor, BranchError> {
    if t.volume() == 1 {
        return Ok(t.clone());
    }
    let mut shape = t.shape().to_vec();
    let per_row: usize = shape[1..].iter().product::<usize>() * t.dtype().size();
    shape[0] = to - from;
    let fact = Fact::new(t.dtype(), shape);
    match t.raw() {
        Some(data) if data.len() >= to * per_row => Ok(Tensor::from_bytes(
            fact,
            data.slice(from * per_row..to * per_row),
        )
        .map_err(|e| BranchError::Mismatch {
            reason: format!("slicing a stem weight: {e}"),
        })?),
        Some(data) => Err(BranchError::Mismatch {
            reason: format!(
                "a stem weight of shape {:?} holds {} bytes, fewer than its rows up to {to} need",
                t.shape(),
                data.len()
            ),
        }),
        None => Ok(Tensor::without_data(fact)),
    }
}

/// Whether `rows` can cut the constant `o` of `g` per output channel: one
/// value, or `channels` rows.
fn per_channel(g: &Graph, o: Outlet, channels: usize) -> bool {
    g.fact(o)
        .is_some_and(|f| f.volume() == 1 || f.shape.first() == Some(&channels))
}

/// One layer of a piece: its name, operator and constant operands (named),
/// each cut to the piece's channels.
struct Layer {
    name: String,
    op: Op,
    operands: Vec<(String, Tensor)>,
}

/// The layers of the piece of `chain` (of `g`) computing channels
/// `from..to`, in order.
fn layers(g: &Graph, chain: &Chain, (from, to): (usize, usize)) -> Result<Vec<Layer>, BranchError> {
    chain
        .nodes
        .iter()
        .map(|id| {
            let node = g.node(*id);
            let operands = node.inputs[1..]
                .iter()
                .enumerate()
                .map(|(k, o)| Ok((format!("{}.in{}", node.name, k + 1), rows(&weight(g, *o), from, to)?)))
                .collect::<Result<_, BranchError>>()?;
            Ok(Layer {
                name: node.name.clone(),
                op: node.op.clone(),
                operands,
            })
        })
        .collect()
}

/// Adds to `patch` the piece of `chain` (of `g`) computing channels
/// `from..to` from `input`, its nodes named with `prefix` and tagged with
/// `tags`; returns the piece's output.
fn add_piece(
    g: &Graph,
    chain: &Chain,
    patch: &mut Patch,
    input: PatchOutlet,
    range: (usize, usize),
    prefix: &str,
    tags: &[(&str, String)],
) -> Result<PatchOutlet, BranchError> {
    let mut x = input;
    for layer in layers(g, chain, range)? {
        let mut inputs = vec![x];
        for (name, t) in layer.operands {
            inputs.push(patch.add_const(format!("{prefix}{name}"), t));
        }
        let new = patch.add_node(format!("{prefix}{}", layer.name), layer.op, inputs);
        for (k, v) in tags {
            patch.annotate_new(new, *k, v.clone());
        }
        x = new.out(0);
    }
    Ok(x)
}

/// A standalone graph of the piece of `chain` computing `channels` output
/// channels (weights without data), for predicting its latency.
pub fn piece_graph(g: &Graph, chain: &Chain, channels: usize) -> Result<Graph, BranchError> {
    let mut p = Graph::new("stem-piece");
    let fact = g.fact(chain.input).cloned().unwrap_or_else(|| Fact::f32(vec![0]));
    let mut x = p.add_input("x", Fact::new(fact.dtype, fact.shape))?;
    for layer in layers(g, chain, (0, channels))? {
        let mut inputs = vec![x];
        for (name, t) in layer.operands {
            inputs.push(p.add_const(name, t)?);
        }
        x = p.add_node(layer.name, layer.op, &inputs)?.out(0);
    }
    p.set_outputs(vec![("y".into(), x)])?;
    Ok(p)
}

/// Replaces `chain` in `g` by one piece per share (in order, each on its
/// processor) and a Concat on `primary`, tagged as a meeting point.
pub fn apply(g: &mut Graph, chain: &Chain, split: &[StemShare], primary: &str) -> Result<(), BranchError> {
    let mut patch = Patch::new();
    let mut outs = Vec::new();
    let mut from = 0;
    for (i, s) in split.iter().enumerate() {
        let tags = [
            (keys::PROCESSOR, s.processor.clone()),
            (keys::MEETING_POINT, "false".to_string()),
        ];
        let range = (from, from + s.channels);
        outs.push(add_piece(
            g,
            chain,
            &mut patch,
            chain.input.into(),
            range,
            &format!("stem.p{i}."),
            &tags,
        )?);
        from += s.channels;
    }
    let merge = patch.add_node("stem.merge", Op::Concat(Concat { axis: 1 }), outs);
    patch.annotate_new(merge, keys::PROCESSOR, primary.to_string());
    patch.annotate_new(merge, keys::MEETING_POINT, "true");
    patch.shunt(chain.output, merge.out(0));
    for id in chain.nodes.iter().rev() {
        patch.remove(*id);
    }
    g.apply(patch)?;
    Ok(())
}

/// The best split of `chain` over two or more of `processors` (channels in
/// proportion to each one's speed on the whole stem, `whole_ms`, in
/// multiples of `multiple`) and its predicted time, when it beats the
/// whole stem on `primary`; otherwise `None`.
pub fn plan_split(
    g: &Graph,
    chain: &Chain,
    model: &dyn LatencyModel,
    processors: &[String],
    primary: &str,
    whole_ms: &HashMap<String, f64>,
    multiple: usize,
) -> Result<Option<(Vec<StemShare>, f64)>, BranchError> {
    let bytes = |o: Outlet| g.fact(o).map_or(0, |f| f.bytes() as u64);
    let in_bytes = bytes(chain.input);
    let out_bytes = bytes(chain.output);
    let mut piece_ms: HashMap<(usize, usize), f64> = HashMap::new();
    let mut best: Option<(Vec<StemShare>, f64)> = None;
    for mask in 1usize..(1 << processors.len()) {
        if mask.count_ones() < 2 {
            continue;
        }
        let sub: Vec<usize> = (0..processors.len()).filter(|i| mask & (1 << i) != 0).collect();
        let weights: Vec<usize> = sub
            .iter()
            .map(|&i| (1e6 / whole_ms[&processors[i]].max(1e-9)).round().max(1.0) as usize)
            .collect();
        let split = shares(chain.channels, &weights, multiple);
        if split.iter().sum::<usize>() != chain.channels || split.contains(&0) {
            continue;
        }
        let mut slowest = 0.0f64;
        let mut cuts = Vec::new();
        for (&i, &c) in sub.iter().zip(&split) {
            let p = &processors[i];
            let ms = match piece_ms.get(&(i, c)) {
                Some(ms) => *ms,
                None => {
                    let ms = model.predict_graph(&piece_graph(g, chain, c)?, p)?.total_ms;
                    piece_ms.insert((i, c), ms);
                    ms
                }
            };
            let comm = if p == primary {
                0.0
            } else {
                let share_bytes = out_bytes / chain.channels.max(1) as u64 * c as u64;
                model.comm_ms(primary, p, in_bytes)? + model.comm_ms(p, primary, share_bytes)?
            };
            slowest = slowest.max(ms + comm);
            cuts.push(StemShare {
                processor: p.clone(),
                channels: c,
                predicted_ms: ms,
            });
        }
        let total = slowest + concat_ms(g, chain, &split, model, primary)?;
        if best.as_ref().is_none_or(|b| total < b.1) {
            best = Some((cuts, total));
        }
    }
    Ok(best.filter(|b| b.1 < whole_ms[primary]))
}

/// The Concat of the pieces' outputs on `primary`.
fn concat_ms(
    g: &Graph,
    chain: &Chain,
    split: &[usize],
    model: &dyn LatencyModel,
    primary: &str,
) -> Result<f64, BranchError> {
    let shape = g.fact(chain.output).map(|f| f.shape.clone()).unwrap_or_default();
    let mut c = Graph::new("stem-merge");
    let mut ins = Vec::new();
    for (i, ch) in split.iter().enumerate() {
        let mut s = shape.clone();
        s[1] = *ch;
        ins.push(c.add_input(format!("x{i}"), Fact::f32(s))?);
    }
    let y = c.add_node("merge", Op::Concat(Concat { axis: 1 }), &ins)?;
    c.set_outputs(vec![("y".into(), y.out(0))])?;
    Ok(model.predict_graph(&c, primary)?.total_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ir::analysis::analyze;
    use graph_ir::builder::{Builder, ConvSpec};

    fn zoo(name: &str) -> Graph {
        let o = graph_ir::zoo::ZooOptions {
            input_size: 32,
            classes: 10,
        };
        graph_ir::zoo::build(name, &o).unwrap()
    }

    #[test]
    fn the_chain_is_the_stem_convolution_and_the_channel_wise_layers_after_it() {
        for name in ["resnet-mini", "mbnet-mini"] {
            let g = zoo(name);
            let c = chain(&g, &analyze(&g).unwrap().stem).unwrap();
            let ops: Vec<&str> = c.nodes.iter().map(|id| g.node(*id).op.name()).collect();
            assert_eq!(
                ops,
                [
                    "Conv",
                    "BatchNormalization",
                    if name == "resnet-mini" { "Relu" } else { "Clip" }
                ],
                "{name}"
            );
            assert_eq!(c.channels, 16);
        }
    }

    #[test]
    fn rows_cut_per_channel_weights_and_keep_single_values() {
        let w = Tensor::from_f32(vec![4, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        let cut = rows(&w, 1, 3).unwrap();
        assert_eq!(cut.shape(), [2, 2]);
        assert_eq!(cut.to_f32_vec().unwrap(), [2.0, 3.0, 4.0, 5.0]);
        let bound = Tensor::from_f32(vec![], &[6.0]);
        assert_eq!(rows(&bound, 1, 3).unwrap(), bound);
        let shape_only = rows(&Tensor::without_data(Fact::f32(vec![4, 2])), 0, 1).unwrap();
        assert!(!shape_only.has_data());
        assert_eq!(shape_only.shape(), [1, 2]);
    }

    #[test]
    fn a_grouped_first_convolution_is_not_split() {
        let mut b = Builder::new("g");
        let x = b.input("x", &[1, 4, 8, 8]).unwrap();
        let y = b.conv("c", x, ConvSpec::new(8, 3, 1).group(2)).unwrap();
        let g = b.finish("y", y).unwrap();
        let stem = Segment {
            input: x,
            output: y,
            nodes: g.compute_order().unwrap(),
        };
        assert!(chain(&g, &stem).is_none());
    }

    #[test]
    fn pieces_take_their_rows_of_every_weight() {
        let mut g = zoo("resnet-mini");
        g.fill_missing_weights(2);
        let c = chain(&g, &analyze(&g).unwrap().stem).unwrap();
        let conv_w = g
            .const_tensor(g.node(c.nodes[0]).inputs[1])
            .unwrap()
            .to_f32_vec()
            .unwrap();
        let split = [("a", 8), ("b", 8)].map(|(p, ch)| StemShare {
            processor: p.into(),
            channels: ch,
            predicted_ms: 0.0,
        });
        apply(&mut g, &c, &split, "a").unwrap();
        let w = |n: &str| g.const_tensor(g.find(n).unwrap().out(0)).unwrap().to_f32_vec().unwrap();
        let half = conv_w.len() / 2;
        assert_eq!(w("stem.p0.stem.in1"), conv_w[..half]);
        assert_eq!(w("stem.p1.stem.in1"), conv_w[half..]);
        let merge = g.find("stem.merge").unwrap();
        assert_eq!(g.node(merge).annotations[keys::MEETING_POINT], "true");
        assert_eq!(g.fact(merge.out(0)).unwrap().shape, [1, 16, 32, 32]);
    }
}
