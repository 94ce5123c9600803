//! The database of measured subgraph times shared by `analyze
//! --runtime-config` and `plan --measure-on`: a subgraph's median, keyed by
//! what it computes (its structure, not its names or weights) and by the
//! engine, threads and cores of the processor that timed it.

use super::TimingError;
use crate::ProcessorConfig;
use graph_ir::{Graph, NodeId, Op};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Measured medians by key (see [`key`]).
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Db {
    /// Piece key -> median ms.
    pub pieces: BTreeMap<String, f64>,
}

impl Db {
    /// The database at `path`, empty when there is none yet (or no path).
    pub fn open(path: Option<&Path>) -> Result<Db, TimingError> {
        match path.map(|p| (p, std::fs::read_to_string(p))) {
            Some((path, Ok(text))) => serde_json::from_str(&text).map_err(|e| TimingError::CostDb {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
            _ => Ok(Db::default()),
        }
    }

    /// Writes the database to `path`, making its folder if needed.
    pub fn save(&self, path: &Path) -> Result<(), TimingError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).ok();
        }
        let write = |reason: String| TimingError::Write {
            path: path.to_path_buf(),
            reason,
        };
        let text = serde_json::to_string_pretty(self).map_err(|e| write(e.to_string()))?;
        std::fs::write(path, text).map_err(|e| write(e.to_string()))
    }
}

/// The key of `nodes` of `g` timed on `p`, with `method` naming how they
/// were timed (empty for a piece timed cold, between other models').
pub fn key(g: &Graph, nodes: &[NodeId], p: &ProcessorConfig, method: &str) -> String {
    format!("{:016x}@{}{method}", fnv(&structure(g, nodes)), signature(p))
}

/// FNV-1a, 64 bits: stable across builds, unlike the standard hasher.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What a piece computes, without names or weight values: each node's
/// operator and attributes, where each input comes from (a node of the
/// piece, or an outside value or weight of a given shape) and its output shapes.
fn structure(g: &Graph, nodes: &[NodeId]) -> String {
    let at: HashMap<NodeId, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut s = String::new();
    for id in nodes {
        let node = g.node(*id);
        s += &format!("{:?}(", node.op);
        for o in &node.inputs {
            let shape = g.fact(*o).map(|f| f.shape.clone()).unwrap_or_default();
            match at.get(&o.node) {
                Some(i) => s += &format!("n{i}.{},", o.slot),
                None if matches!(g.node(o.node).op, Op::Const(_)) => s += &format!("w{shape:?},"),
                None => s += &format!("x{shape:?},"),
            }
        }
        s += ")->";
        for k in 0..node.outputs.len() {
            let shape = g.fact(id.out(k)).map(|f| f.shape.clone()).unwrap_or_default();
            s += &format!("{shape:?};");
        }
    }
    s
}

fn signature(p: &ProcessorConfig) -> String {
    format!(
        "{:?}/{}/{}/cold",
        p.engine,
        p.threads,
        p.cores.as_ref().map_or("-".into(), |c| c.to_string())
    )
}
