//! Checkpoints: everything a run needs to continue exactly where it stopped.
//!
//! File layout: the 8 bytes `STRETCH1`, a little-endian u64 header length, a
//! JSON header ([`Header`]), then every array the header lists, as
//! little-endian f32, in order. Files are written to a temporary name and
//! renamed, so an interrupted write never replaces the last good checkpoint.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::data::Transform;
use crate::error::TrainError;
use crate::recipe::{EpochMetrics, Recipe};

const MAGIC: &[u8; 8] = b"STRETCH1";

/// What a checkpoint says about its run; arrays follow it in the file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    pub schema: String,
    /// Names and shapes of the model's parameters, to refuse another model's checkpoint.
    pub params: Vec<(String, Vec<usize>)>,
    pub recipe: Recipe,
    pub dataset: String,
    pub transform: Transform,
    pub epochs_done: usize,
    pub optimizer_step: u64,
    pub history: Vec<EpochMetrics>,
    /// Which optimizer buffers are present (first, second moment per parameter).
    pub buffers: Vec<(bool, bool)>,
}

/// A checkpoint in memory.
pub struct Checkpoint {
    pub header: Header,
    pub values: Vec<Vec<f32>>,
    pub first: Vec<Option<Vec<f32>>>,
    pub second: Vec<Option<Vec<f32>>>,
}

impl Checkpoint {
    pub fn save(&self, path: &Path) -> Result<(), TrainError> {
        let header = serde_json::to_vec(&self.header).expect("serialisable header");
        let mut bytes = Vec::new();
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&header);
        let arrays = self
            .values
            .iter()
            .chain(self.first.iter().flatten())
            .chain(self.second.iter().flatten());
        for a in arrays {
            for v in a {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, &bytes).map_err(|e| TrainError::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| TrainError::io(path, e))
    }

    pub fn load(path: &Path) -> Result<Checkpoint, TrainError> {
        let bad = |reason: String| TrainError::Checkpoint {
            path: path.to_path_buf(),
            reason,
        };
        let bytes = std::fs::read(path).map_err(|e| TrainError::io(path, e))?;
        if bytes.len() < 16 || &bytes[..8] != MAGIC {
            return Err(bad("not a stretch checkpoint (no STRETCH1 magic)".into()));
        }
        let len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")) as usize;
        let body = bytes
            .get(16..16usize.saturating_add(len))
            .ok_or_else(|| bad("truncated header".into()))?;
        let header: Header = serde_json::from_slice(body).map_err(|e| bad(format!("bad header: {e}")))?;
        if header.schema != SCHEMA {
            return Err(bad(format!("schema '{}', expected '{SCHEMA}'", header.schema)));
        }
        let mut floats = bytes[16 + len..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")));
        let mut take = |n: usize, what: &str| -> Result<Vec<f32>, TrainError> {
            let v: Vec<f32> = floats.by_ref().take(n).collect();
            if v.len() == n {
                Ok(v)
            } else {
                Err(bad(format!("truncated data in {what}")))
            }
        };
        let mut values = Vec::new();
        for (name, shape) in &header.params {
            values.push(take(shape.iter().product(), name)?);
        }
        let mut first = Vec::new();
        for ((name, shape), (f, _)) in header.params.iter().zip(&header.buffers) {
            first.push(if *f {
                Some(take(shape.iter().product(), name)?)
            } else {
                None
            });
        }
        let mut second = Vec::new();
        for ((name, shape), (_, s)) in header.params.iter().zip(&header.buffers) {
            second.push(if *s {
                Some(take(shape.iter().product(), name)?)
            } else {
                None
            });
        }
        if floats.next().is_some() {
            return Err(bad("data after the last array".into()));
        }
        Ok(Checkpoint {
            header,
            values,
            first,
            second,
        })
    }
}

pub const SCHEMA: &str = "stretch.checkpoint/1";
