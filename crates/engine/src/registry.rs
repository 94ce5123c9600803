//! The one list of engines. A processor's configuration names its engine
//! (`engine = "tract" | "ort"`) or, for a cloud worker, gives a remote
//! address; the registry finds the entry that builds it. The engines of
//! this crate are [`EngineRegistry::builtin`]; a crate or a test that adds
//! one adds its entry with [`EngineRegistry::with`] and hands the registry
//! to whatever parses configurations and makes engines (the runtime, the
//! profiler, the bundle runner).

use crate::config::EngineConfig;
use crate::engine::Engine;
use crate::error::EngineError;

/// Which configurations an entry builds.
#[derive(Clone, Copy)]
pub enum Builds {
    /// Local processors whose `engine` is the entry's name: the entry is
    /// named in configurations and on command lines.
    Named,
    /// The configurations the predicate accepts (a cloud worker: those
    /// with a remote address); the entry is not named in configurations.
    When(fn(&EngineConfig) -> bool),
}

/// One engine.
#[derive(Clone, Copy)]
pub struct EngineEntry {
    /// The registered name (`tract`, `ort`, `cloud`): what configurations
    /// give as `engine`, what [`Engine::name`] returns.
    pub name: &'static str,
    /// Other spellings a configuration may use (`onnxruntime`).
    pub aliases: &'static [&'static str],
    /// One line for `--help`.
    pub summary: &'static str,
    pub builds: Builds,
    pub make: fn(&EngineConfig) -> Result<Box<dyn Engine>, EngineError>,
}

impl EngineEntry {
    /// Whether this entry builds the engine of `config`.
    pub fn builds(&self, config: &EngineConfig) -> bool {
        match self.builds {
            Builds::Named => config.remote.is_none() && config.engine == self.name,
            Builds::When(f) => f(config),
        }
    }
}

/// Whether this build has the onnxruntime engine (feature `ort`).
pub const ORT_BUILT: bool = cfg!(feature = "ort");

/// Engines, asked in order.
#[derive(Clone)]
pub struct EngineRegistry {
    entries: Vec<EngineEntry>,
}

/// tract, built in (feature `onnx`: tract's ONNX loader).
#[cfg(feature = "onnx")]
pub const TRACT: EngineEntry = EngineEntry {
    name: "tract",
    aliases: &[],
    summary: "tract (sonos/tract), pure Rust",
    builds: Builds::Named,
    make: |c| Ok(Box::new(crate::tract::TractEngine::new(c.threads)?)),
};

/// onnxruntime, loaded at run time (feature `ort`).
pub const ORT: EngineEntry = EngineEntry {
    name: "ort",
    aliases: &["onnxruntime"],
    summary: "onnxruntime as the runtime's `engine=ort` processors run it (one session per kernel, \
              intra-op spinning off, outputs handed back as the runtime receives them), so that \
              plans for those processors can be made on its costs",
    builds: Builds::Named,
    make: ort,
};

#[cfg(feature = "ort")]
fn ort(c: &EngineConfig) -> Result<Box<dyn Engine>, EngineError> {
    if c.threads == 0 {
        return Err(EngineError::ZeroThreads { engine: "ort" });
    }
    Ok(Box::new(crate::ort::OrtEngine::new(c.threads, c.spin)?))
}

#[cfg(not(feature = "ort"))]
fn ort(_: &EngineConfig) -> Result<Box<dyn Engine>, EngineError> {
    Err(EngineError::Unavailable {
        engine: "ort",
        reason: "this build has no onnxruntime engine (build with the `ort` feature)".into(),
    })
}

impl EngineRegistry {
    /// tract and onnxruntime, for local processors (onnxruntime alone in
    /// a build without the `onnx` feature).
    pub fn builtin() -> EngineRegistry {
        EngineRegistry {
            #[cfg(feature = "onnx")]
            entries: vec![TRACT, ORT],
            #[cfg(not(feature = "onnx"))]
            entries: vec![ORT],
        }
    }

    /// No engine: a runner that links only the engines it adds with
    /// [`EngineRegistry::with`] (the slim runner of LiteRT files).
    pub fn empty() -> EngineRegistry {
        EngineRegistry { entries: Vec::new() }
    }

    /// This registry with `entry` asked before the others.
    pub fn with(mut self, entry: EngineEntry) -> EngineRegistry {
        self.entries.insert(0, entry);
        self
    }

    /// Every entry's name, in the order they are asked.
    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.name).collect()
    }

    /// The entries configurations name ([`Builds::Named`]), in order.
    pub fn named(&self) -> impl Iterator<Item = &EngineEntry> {
        self.entries.iter().filter(|e| matches!(e.builds, Builds::Named))
    }

    /// The registered name `name` spells (itself or an alias of a named
    /// entry); [`EngineError::Unknown`] listing the named entries otherwise.
    pub fn canonical(&self, name: &str) -> Result<&'static str, EngineError> {
        self.named()
            .find(|e| e.name == name || e.aliases.contains(&name))
            .map(|e| e.name)
            .ok_or_else(|| EngineError::Unknown {
                name: name.to_string(),
                known: self.named().map(|e| e.name).collect::<Vec<_>>().join(", "),
            })
    }

    /// The local engine `name` (checked as [`EngineRegistry::canonical`]
    /// does) with `threads` intra-op threads, for a processor named
    /// `processor`: what a profiling run or a cloud worker's server runs
    /// models on.
    pub fn local(&self, processor: &str, name: &str, threads: usize) -> Result<Box<dyn Engine>, EngineError> {
        let name = self.canonical(name)?;
        self.make(&EngineConfig::new(processor, name, threads))
    }

    /// The engine of `config`, from the first entry that builds it.
    pub fn make(&self, config: &EngineConfig) -> Result<Box<dyn Engine>, EngineError> {
        match self.entries.iter().find(|e| e.builds(config)) {
            Some(e) => (e.make)(config),
            None if config.remote.is_some() => Err(EngineError::Unavailable {
                engine: "cloud",
                reason: format!(
                    "processor '{}' names a remote worker, and this program has no cloud engine (engines: {})",
                    config.processor,
                    self.names().join(", ")
                ),
            }),
            None => Err(EngineError::Unavailable {
                engine: "none",
                reason: format!(
                    "no engine builds processor '{}' (engines: {})",
                    config.processor,
                    self.names().join(", ")
                ),
            }),
        }
    }
}

#[cfg(all(test, feature = "onnx"))]
mod tests {
    use super::*;
    use crate::config::Remote;

    #[test]
    fn a_remote_processor_needs_a_registered_cloud_engine() {
        let mut c = EngineConfig::new("cloud", "tract", 1);
        c.remote = Some(Remote::new("127.0.0.1:9"));
        let e = EngineRegistry::builtin().make(&c).err().unwrap().to_string();
        assert!(e.contains("processor 'cloud' names a remote worker"), "{e}");
        let local = EngineConfig::new("cpu0", "tract", 1);
        assert_eq!(EngineRegistry::builtin().make(&local).unwrap().name(), "tract");
        let with = EngineRegistry::builtin().with(EngineEntry {
            name: "cloud",
            aliases: &[],
            summary: "",
            builds: Builds::When(|c| c.remote.is_some()),
            make: TRACT.make,
        });
        assert_eq!(with.names(), ["cloud", "tract", "ort"]);
        assert_eq!(with.make(&c).unwrap().name(), "tract");
    }

    #[test]
    fn names_are_checked_against_the_named_entries() {
        let r = EngineRegistry::builtin().with(EngineEntry {
            name: "cloud",
            aliases: &[],
            summary: "",
            builds: Builds::When(|c| c.remote.is_some()),
            make: TRACT.make,
        });
        assert_eq!(r.canonical("onnxruntime").unwrap(), "ort");
        assert_eq!(
            r.canonical("cloud").unwrap_err().to_string(),
            "unknown engine 'cloud' (tract, ort)"
        );
    }
}
