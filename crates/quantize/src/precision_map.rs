//! Which precision each node computes at: its `processor` annotation
//! looked up in a processor → precision table (a device profile's), or one
//! given precision for a model whose nodes carry no processor.

use crate::error::QuantizeError;
use graph_ir::{Node, keys};
use predictor::{DeviceProfile, Precision};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
pub struct PrecisionMap {
    by_processor: BTreeMap<String, Precision>,
    /// For nodes without a `processor` annotation: (processor, precision).
    unannotated: Option<(String, Precision)>,
}

impl PrecisionMap {
    pub fn new(by_processor: BTreeMap<String, Precision>, unannotated: Option<(String, Precision)>) -> PrecisionMap {
        PrecisionMap {
            by_processor,
            unannotated,
        }
    }

    /// Each processor of `profile` at the precision it runs; nodes without
    /// a processor are taken to run on `unannotated` (one of its processors).
    pub fn from_profile(profile: &DeviceProfile, unannotated: Option<&str>) -> Result<PrecisionMap, QuantizeError> {
        let by_processor: BTreeMap<String, Precision> = profile
            .processors
            .iter()
            .map(|(n, p)| (n.clone(), p.precision()))
            .collect();
        let unannotated = match unannotated {
            None => None,
            Some(p) => {
                let precision = *by_processor.get(p).ok_or_else(|| QuantizeError::UnknownProcessor {
                    node: None,
                    processor: p.to_string(),
                    available: by_processor.keys().cloned().collect::<Vec<_>>().join(", "),
                })?;
                Some((p.to_string(), precision))
            }
        };
        Ok(PrecisionMap {
            by_processor,
            unannotated,
        })
    }

    /// The precision node `n` computes at.
    pub fn of(&self, n: &Node) -> Result<Precision, QuantizeError> {
        match n.annotations.get(keys::PROCESSOR) {
            Some(p) => self
                .by_processor
                .get(p)
                .copied()
                .ok_or_else(|| QuantizeError::UnknownProcessor {
                    node: Some(n.name.clone()),
                    processor: p.clone(),
                    available: self.by_processor.keys().cloned().collect::<Vec<_>>().join(", "),
                }),
            None => self
                .unannotated
                .as_ref()
                .map(|(_, p)| *p)
                .ok_or_else(|| QuantizeError::Unannotated { node: n.name.clone() }),
        }
    }

    /// The table, `processor=precision,...` (the form of metadata
    /// [`graph_ir::keys::PRECISIONS`]).
    pub fn describe(&self) -> String {
        self.pairs()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The `(processor, precision)` pairs of the table, by processor name.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.by_processor
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect()
    }

    /// Whether any processor of the table runs `p`.
    pub fn uses(&self, p: Precision) -> bool {
        self.by_processor.values().any(|x| *x == p) || self.unannotated.as_ref().is_some_and(|(_, x)| *x == p)
    }
}
