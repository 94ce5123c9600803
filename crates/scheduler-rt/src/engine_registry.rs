//! The one list of engine kinds. A processor's configuration names its
//! engine (`engine = "tract" | "ort"`, or `remote = ADDR` for a cloud
//! worker); the registry finds the entry that builds it. This crate
//! registers its own engines ([`EngineRegistry::builtin`]); a crate that
//! adds a kind (multi-dnn's cloud engine) adds its entry with
//! [`EngineRegistry::with`] and hands the result to whatever starts
//! workers as an [`EngineFactory`].

use crate::config::{EngineKind, ProcessorConfig};
use crate::engine::{Engine, EngineFactory, TractEngine};
use crate::error::RuntimeError;
use std::sync::Arc;

/// One kind of engine.
#[derive(Clone, Copy)]
pub struct EngineEntry {
    /// The kind's name in messages (`tract`, `ort`, `cloud`).
    pub kind: &'static str,
    /// Whether this entry builds the engine of `config`.
    pub builds: fn(&ProcessorConfig) -> bool,
    pub make: fn(&ProcessorConfig) -> Result<Box<dyn Engine>, RuntimeError>,
}

/// Engine kinds, asked in order.
#[derive(Clone)]
pub struct EngineRegistry {
    entries: Vec<EngineEntry>,
}

fn tract(c: &ProcessorConfig) -> Result<Box<dyn Engine>, RuntimeError> {
    Ok(Box::new(TractEngine::new(c.threads)))
}

#[cfg(feature = "ort")]
fn ort(c: &ProcessorConfig) -> Result<Box<dyn Engine>, RuntimeError> {
    Ok(Box::new(crate::ort_engine::OrtEngine::new(c.threads, c.spin)?))
}

#[cfg(not(feature = "ort"))]
fn ort(_: &ProcessorConfig) -> Result<Box<dyn Engine>, RuntimeError> {
    Err(RuntimeError::EngineUnavailable {
        engine: "ort",
        reason: "this build has no onnxruntime engine (build with the `ort` feature)".into(),
    })
}

impl EngineRegistry {
    /// tract and onnxruntime, for local processors.
    pub fn builtin() -> EngineRegistry {
        EngineRegistry {
            entries: vec![
                EngineEntry {
                    kind: "tract",
                    builds: |c| c.remote.is_none() && c.engine == EngineKind::Tract,
                    make: tract,
                },
                EngineEntry {
                    kind: "ort",
                    builds: |c| c.remote.is_none() && c.engine == EngineKind::Ort,
                    make: ort,
                },
            ],
        }
    }

    /// This registry with `entry` asked before the others.
    pub fn with(mut self, entry: EngineEntry) -> EngineRegistry {
        self.entries.insert(0, entry);
        self
    }

    /// The kinds, in the order they are asked.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.kind).collect()
    }

    /// The engine of `config`, from the first entry that builds it.
    pub fn make(&self, config: &ProcessorConfig) -> Result<Box<dyn Engine>, RuntimeError> {
        match self.entries.iter().find(|e| (e.builds)(config)) {
            Some(e) => (e.make)(config),
            None if config.remote.is_some() => Err(RuntimeError::EngineUnavailable {
                engine: "cloud",
                reason: format!(
                    "processor '{}' names a remote worker, and this program has no cloud engine (engines: {})",
                    config.name,
                    self.kinds().join(", ")
                ),
            }),
            None => Err(RuntimeError::EngineUnavailable {
                engine: "none",
                reason: format!(
                    "no engine builds processor '{}' (engines: {})",
                    config.name,
                    self.kinds().join(", ")
                ),
            }),
        }
    }

    /// A factory making each processor's engine from this registry.
    pub fn factory(self) -> Arc<EngineFactory> {
        Arc::new(move |c: &ProcessorConfig| self.make(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_processor_needs_a_registered_cloud_engine() {
        let c: ProcessorConfig = "cloud=pool,remote=127.0.0.1:9".parse().unwrap();
        let e = EngineRegistry::builtin().make(&c).err().unwrap().to_string();
        assert!(e.contains("processor 'cloud' names a remote worker"), "{e}");
        let local: ProcessorConfig = "cpu0=inline".parse().unwrap();
        assert_eq!(EngineRegistry::builtin().make(&local).unwrap().name(), "tract");
        let with = EngineRegistry::builtin().with(EngineEntry {
            kind: "cloud",
            builds: |c| c.remote.is_some(),
            make: tract,
        });
        assert_eq!(with.kinds(), ["cloud", "tract", "ort"]);
        assert_eq!(with.make(&c).unwrap().name(), "tract");
    }
}
