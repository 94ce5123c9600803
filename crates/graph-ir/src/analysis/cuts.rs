//! Cut values: values that every path from the input to the output crosses.

use crate::graph::{Graph, NodeId, Outlet};
use crate::ops::Op;
use std::collections::HashMap;

/// The main path of a single-input, single-output graph.
pub(super) struct MainPath {
    /// Non-constant nodes in topological order (the input first).
    pub order: Vec<NodeId>,
    pub pos: HashMap<NodeId, usize>,
    /// Cut values in order, the graph input first and the output last.
    pub cuts: Vec<Outlet>,
}

impl MainPath {
    pub fn new(g: &Graph) -> Result<MainPath, crate::GraphError> {
        let order: Vec<NodeId> = g
            .topo_order()?
            .into_iter()
            .filter(|id| !matches!(g.node(*id).op, Op::Const(_)))
            .collect();
        let pos: HashMap<NodeId, usize> = order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let end = order.len();
        let mut last_use: HashMap<Outlet, usize> = HashMap::new();
        for (i, id) in order.iter().enumerate() {
            for o in &g.node(*id).inputs {
                if pos.contains_key(&o.node) {
                    let e = last_use.entry(*o).or_insert(i);
                    *e = (*e).max(i);
                }
            }
        }
        for (_, o) in g.outputs().iter().filter(|(_, o)| pos.contains_key(&o.node)) {
            last_use.insert(*o, end);
        }
        // live[i] = number of values produced at or before i and used after i.
        let mut delta = vec![0i64; end + 2];
        for (o, &last) in &last_use {
            let p = pos[&o.node];
            if last > p {
                delta[p] += 1;
                delta[last] -= 1;
            }
        }
        let mut live = vec![0i64; end + 1];
        let mut run = 0;
        for i in 0..=end {
            run += delta[i];
            live[i] = run;
        }
        let mut cuts = Vec::new();
        for (i, id) in order.iter().enumerate() {
            let node = g.node(*id);
            for slot in 0..node.outputs.len() {
                let o = id.out(slot);
                if live[i] == 1 && last_use.get(&o).is_some_and(|&l| l > i) {
                    cuts.push(o);
                }
            }
        }
        Ok(MainPath { order, pos, cuts })
    }

    /// Nodes strictly after cut `a` up to and including the producer of cut `b`.
    pub fn between(&self, a: Outlet, b: Outlet) -> Vec<NodeId> {
        let (pa, pb) = (self.pos[&a.node], self.pos[&b.node]);
        self.order[pa + 1..=pb].to_vec()
    }
}
