//! The database of measured piece times shared by `analyze
//! --runtime-config` and `plan --measure-on`: a piece's median, keyed by
//! what it computes (its structure, not its names or weights) and by the
//! engine, threads and cores of the processor that timed it.

use anyhow::{Context, Result};
use graph_ir::{Graph, NodeId, Op};
use scheduler_rt::ProcessorConfig;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

#[derive(Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Db {
    /// Piece key -> median ms.
    pub(crate) pieces: BTreeMap<String, f64>,
}

impl Db {
    /// The database at `path`, empty when there is none yet (or no path).
    pub(crate) fn open(path: Option<&Path>) -> Result<Db> {
        match path.map(|p| (p, std::fs::read_to_string(p))) {
            Some((path, Ok(text))) => serde_json::from_str(&text)
                .with_context(|| format!("{}: not a cost database (delete it to start afresh)", path.display())),
            _ => Ok(Db::default()),
        }
    }

    /// Writes the database to `path`, making its folder if needed.
    pub(crate) fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).ok();
        }
        std::fs::write(path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// FNV-1a, 64 bits: stable across builds, unlike the standard hasher.
pub(crate) fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What a piece computes, without names or weight values: each node's
/// operator and attributes, where each input comes from (a node of the
/// piece, or an outside value or weight of a given shape) and its output shapes.
pub(crate) fn structure(g: &Graph, nodes: &[NodeId]) -> String {
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

pub(crate) fn signature(p: &ProcessorConfig) -> String {
    format!(
        "{:?}/{}/{}/cold",
        p.engine,
        p.threads,
        p.cores.as_ref().map_or("-".into(), |c| c.to_string())
    )
}
