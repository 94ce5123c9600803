//! Runtime configuration files (TOML): the processors, their workers,
//! cores, threads and engines, and the adaptation policy.
//!
//! ```toml
//! [[processor]]          # in order; the first runs unannotated nodes
//! name = "cpu0"
//! kind = "inline"        # inline | pool | queue
//! cores = "0"            # cpulist, `core` prefix allowed; omit: unpinned
//! threads = 1            # engine intra-op threads
//! alone_threads = 2      # for subgraphs nothing runs beside (stem, head); omit: threads
//! engine = "tract"       # a registered engine: tract | ort
//! wait = "block"         # block | poll: how its thread waits while a request is in flight
//! spin = "off"          # off | run | on: onnxruntime's intra-op threads spin while waiting (its own default: on)
//! precision = "int8"     # fp32 | fp16 | int8: refuse a model that computes this processor's nodes otherwise
//!
//! supports = ["Conv"]    # multi-DNN serving: only these operators run here,
//! unsupported = ["HardSwish", "DepthwiseConv"]  # or all but these (one of the two)
//! accelerator = false    # Band's beta for latency scaling: 1000 (true) or 10
//!
//! [adaptive]             # omit to keep placement fixed
//! margin = 1.5
//! runs = 3
//! probe_ms = 200
//! ```

use crate::adaptive::AdaptiveParams;
use crate::config::{ProcessorConfig, Wait, WorkerKind};
use crate::error::RuntimeError;
use crate::support::{OpSupport, known_op, known_ops};
use engine::host::CoreSet;
use engine::{EngineRegistry, Remote, Spin};
use serde::Deserialize;
use std::path::Path;
use std::str::FromStr;

/// A loaded runtime configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeConfig {
    pub processors: Vec<ProcessorConfig>,
    /// `Some` when the file has an `[adaptive]` table.
    pub adaptive: Option<AdaptiveParams>,
    /// Operators each processor runs (multi-DNN serving), by processor index.
    pub support: Vec<OpSupport>,
    /// Whether each processor counts as an accelerator for latency
    /// scaling (Band's β), by processor index.
    pub accelerator: Vec<bool>,
    /// The emulated heat of these processors (`[thermal]`, the format of
    /// a device profile's; read by multi-dnn's thermal profiles).
    pub thermal: Option<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    processor: Vec<Processor>,
    adaptive: Option<Adaptive>,
    thermal: Option<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Processor {
    name: String,
    kind: String,
    cores: Option<String>,
    threads: Option<usize>,
    alone_threads: Option<usize>,
    engine: Option<String>,
    wait: Option<String>,
    spin: Option<String>,
    supports: Option<Vec<String>>,
    unsupported: Option<Vec<String>>,
    accelerator: Option<bool>,
    precision: Option<String>,
    /// A cloud worker: the `stretch worker` address and its link.
    remote: Option<String>,
    mbps: Option<f64>,
    rtt_ms: Option<f64>,
    timeout_ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Adaptive {
    margin: Option<f64>,
    runs: Option<usize>,
    probe_ms: Option<f64>,
}

/// The 1-based line of `text` where a TOML parse error `e` points, if it
/// points anywhere.
pub fn toml_line(text: &str, e: &toml::de::Error) -> Option<usize> {
    e.span().map(|s| text[..s.start].matches('\n').count() + 1)
}

/// A configuration error: the key at fault and the reason.
type Bad = (String, String);

impl Processor {
    /// This table, the `i`-th processor after `earlier`, as a processor's
    /// configuration, its operator support and whether it is an accelerator.
    fn resolve(
        self,
        i: usize,
        earlier: &[ProcessorConfig],
        engines: &EngineRegistry,
    ) -> Result<(ProcessorConfig, OpSupport, bool), Bad> {
        let key = |k: &str| format!("processor[{i}].{k}");
        if self.name.is_empty() {
            return Err((key("name"), "the processor name is empty".into()));
        }
        if earlier.iter().any(|q| q.name == self.name) {
            return Err((key("name"), format!("processor '{}' is configured twice", self.name)));
        }
        let kind = WorkerKind::from_str(&self.kind).map_err(|e| (key("kind"), e))?;
        let cores = self
            .cores
            .as_ref()
            .map(|c| CoreSet::from_str(c.strip_prefix("core").unwrap_or(c)).map_err(|e| (key("cores"), e.to_string())))
            .transpose()?;
        let threads = match self.threads {
            Some(0) => return Err((key("threads"), "must be a positive integer, got 0".into())),
            Some(n) => n,
            None => 1,
        };
        if self.alone_threads == Some(0) {
            return Err((key("alone_threads"), "must be a positive integer, got 0".into()));
        }
        let engine = match &self.engine {
            Some(e) => engines.canonical(e).map_err(|e| (key("engine"), e.to_string()))?,
            None => "tract",
        };
        let wait = parsed(&self.wait, Wait::from_str).map_err(|e| (key("wait"), e))?;
        let spin = parsed(&self.spin, Spin::from_str).map_err(|e| (key("spin"), e))?;
        let support = self.support(&key)?;
        let remote = self.remote(&key)?;
        let precision = self
            .precision
            .as_deref()
            .map(|v| predictor::Precision::from_str(v).map_err(|e| (key("precision"), e.to_string())))
            .transpose()?;
        let config = ProcessorConfig {
            name: self.name,
            kind,
            cores,
            threads,
            alone_threads: self.alone_threads,
            engine: engine.to_string(),
            wait,
            spin,
            remote,
            precision,
        };
        Ok((config, support, self.accelerator.unwrap_or(false)))
    }

    /// `supports` or `unsupported`, their operators checked.
    fn support(&self, key: &dyn Fn(&str) -> String) -> Result<OpSupport, Bad> {
        if self.supports.is_some() && self.unsupported.is_some() {
            return Err((key("supports"), "give supports or unsupported, not both".into()));
        }
        for (k, list) in [("supports", &self.supports), ("unsupported", &self.unsupported)] {
            if let Some(op) = list.iter().flatten().find(|o| !known_op(o)) {
                return Err((
                    key(k),
                    format!("unknown operator '{op}' (known: {})", known_ops().join(", ")),
                ));
            }
        }
        Ok(OpSupport::from_lists(
            self.supports.as_deref(),
            self.unsupported.as_deref(),
        ))
    }

    /// The cloud worker's server and link; link options without a server are refused.
    fn remote(&self, key: &dyn Fn(&str) -> String) -> Result<Option<Remote>, Bad> {
        let Some(a) = &self.remote else {
            if self.mbps.is_some() || self.rtt_ms.is_some() || self.timeout_ms.is_some() {
                return Err((
                    key("remote"),
                    "mbps, rtt_ms and timeout_ms apply to a cloud worker (give remote = \"HOST:PORT\")".into(),
                ));
            }
            return Ok(None);
        };
        let mut r = Remote::new(a);
        for (k, v) in [
            ("mbps", self.mbps),
            ("rtt_ms", self.rtt_ms),
            ("timeout_ms", self.timeout_ms),
        ] {
            if let Some(v) = v {
                r.set(&format!("{k}={v}")).map_err(|e| (key(k), e))?;
            }
        }
        Ok(Some(r))
    }
}

/// `value` parsed by `parse`; the default where it is absent.
fn parsed<T: Default>(value: &Option<String>, parse: impl Fn(&str) -> Result<T, String>) -> Result<T, String> {
    value.as_deref().map(parse).transpose().map(Option::unwrap_or_default)
}

impl Adaptive {
    /// The adaptation parameters, defaults filled in and checked.
    fn params(self) -> Result<AdaptiveParams, Bad> {
        let d = AdaptiveParams::default();
        let params = AdaptiveParams {
            margin: self.margin.unwrap_or(d.margin),
            runs: self.runs.unwrap_or(d.runs),
            probe_ms: self.probe_ms.unwrap_or(d.probe_ms),
        };
        if !(params.margin > 1.0 && params.margin.is_finite()) {
            return Err((
                "adaptive.margin".into(),
                format!("must be above 1, got {}", params.margin),
            ));
        }
        if params.runs == 0 {
            return Err(("adaptive.runs".into(), "must be at least 1".into()));
        }
        if !(params.probe_ms > 0.0 && params.probe_ms.is_finite()) {
            return Err((
                "adaptive.probe_ms".into(),
                format!("must be positive, got {}", params.probe_ms),
            ));
        }
        Ok(params)
    }
}

impl RuntimeConfig {
    /// Reads and validates `path` with the built-in engines; errors name
    /// the file and the key.
    pub fn load(path: &Path) -> Result<RuntimeConfig, RuntimeError> {
        Self::load_with(path, &EngineRegistry::builtin())
    }

    /// Reads and validates `path`; `engine` keys must name an engine of
    /// `engines`. Errors name the file and the key.
    pub fn load_with(path: &Path, engines: &EngineRegistry) -> Result<RuntimeConfig, RuntimeError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| RuntimeError::Config {
            file: file.clone(),
            key: String::new(),
            reason: format!("cannot read: {e}"),
        })?;
        Self::parse_with(&text, &file, engines)
    }

    /// Parses TOML `text` with the built-in engines; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<RuntimeConfig, RuntimeError> {
        Self::parse_with(text, file, &EngineRegistry::builtin())
    }

    /// Parses TOML `text`; `engine` keys must name an engine of `engines`;
    /// `file` names it in errors.
    pub fn parse_with(text: &str, file: &str, engines: &EngineRegistry) -> Result<RuntimeConfig, RuntimeError> {
        let bad = |(key, reason): Bad| RuntimeError::Config {
            file: file.to_string(),
            key,
            reason,
        };
        let raw: File = toml::from_str(text).map_err(|e| {
            let key = toml_line(text, &e).map_or_else(|| "-".to_string(), |l| format!("line {l}"));
            bad((key, e.message().to_string()))
        })?;
        if raw.processor.is_empty() {
            return Err(bad(("processor".into(), "no [[processor]] is configured".into())));
        }
        let mut config = RuntimeConfig {
            processors: Vec::new(),
            adaptive: None,
            support: Vec::new(),
            accelerator: Vec::new(),
            thermal: raw.thermal,
        };
        for (i, p) in raw.processor.into_iter().enumerate() {
            let (processor, support, accelerator) = p.resolve(i, &config.processors, engines).map_err(bad)?;
            config.processors.push(processor);
            config.support.push(support);
            config.accelerator.push(accelerator);
        }
        config.adaptive = raw.adaptive.map(Adaptive::params).transpose().map_err(bad)?;
        Ok(config)
    }

    /// Applies command-line processors: one with a configured name replaces
    /// it in place, others are appended in order.
    pub fn with_overrides(mut self, overrides: &[ProcessorConfig]) -> RuntimeConfig {
        for o in overrides {
            match self.processors.iter_mut().find(|p| p.name == o.name) {
                Some(p) => *p = o.clone(),
                None => {
                    self.processors.push(o.clone());
                    self.support.push(OpSupport::All);
                    self.accelerator.push(false);
                }
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_configs_load() {
        for (file, engine) in [("host.toml", "tract"), ("host-ort.toml", "ort")] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../configs/runtime")
                .join(file);
            let c = RuntimeConfig::load(&path).unwrap();
            let specs: Vec<String> = c.processors.iter().map(ProcessorConfig::spec).collect();
            assert_eq!(
                specs,
                [
                    format!("cpu0=inline:0,threads=1,alone_threads=2,engine={engine},wait=poll"),
                    format!("cpu1=pool:1,threads=1,alone_threads=2,engine={engine},wait=poll")
                ],
                "{file}"
            );
            assert_eq!(c.adaptive, None);
        }
    }

    #[test]
    fn an_unreadable_file_is_named_without_a_key() {
        let e = RuntimeConfig::load(Path::new("/nonexistent/rt.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/rt.toml: cannot read: "), "{e}");
        let e = RuntimeConfig::parse("[[processor]]\nname = 3\n", "rt.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("rt.toml: "), "{e}");
    }

    #[test]
    fn processors_keep_their_order_and_overrides_replace_or_add() {
        let c = RuntimeConfig::parse(
            "[[processor]]\nname = \"b\"\nkind = \"pool\"\ncores = \"core1\"\nengine = \"ort\"\nthreads = 2\n\
             [[processor]]\nname = \"a\"\nkind = \"queue\"\n[adaptive]\nruns = 5\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.processors[0].spec(), "b=pool:1,threads=2,engine=ort");
        assert_eq!(c.processors[1].spec(), "a=queue,threads=1,engine=tract");
        assert_eq!(c.adaptive.as_ref().map(|a| (a.runs, a.margin)), Some((5, 1.5)));
        let c = c.with_overrides(&["a=inline".parse().unwrap(), "c=pool".parse().unwrap()]);
        let names: Vec<(&str, WorkerKind)> = c.processors.iter().map(|p| (p.name.as_str(), p.kind)).collect();
        assert_eq!(
            names,
            [
                ("b", WorkerKind::Pool),
                ("a", WorkerKind::Inline),
                ("c", WorkerKind::Pool)
            ]
        );
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        let p = "[[processor]]\nname = \"cpu0\"\nkind = \"inline\"\n";
        for (text, key, words) in [
            ("", "processor", "no [[processor]]"),
            (
                &format!("{p}[[processor]]\nname = \"cpu0\"\nkind = \"pool\"\n") as &str,
                "processor[1].name",
                "twice",
            ),
            (
                "[[processor]]\nname = \"x\"\nkind = \"gpu\"\n",
                "processor[0].kind",
                "'gpu'",
            ),
            (
                "[[processor]]\nname = \"x\"\nkind = \"pool\"\ncores = \"a\"\n",
                "processor[0].cores",
                "",
            ),
            (
                "[[processor]]\nname = \"x\"\nkind = \"pool\"\nthreads = 0\n",
                "processor[0].threads",
                "0",
            ),
            (
                "[[processor]]\nname = \"x\"\nkind = \"pool\"\nengine = \"trt\"\n",
                "processor[0].engine",
                "'trt'",
            ),
            (
                "[[processor]]\nname = \"x\"\nkind = \"pool\"\nprecision = \"int4\"\n",
                "processor[0].precision",
                "unknown precision `int4`",
            ),
            (&format!("{p}corez = 1\n"), "line 4", "corez"),
            (&format!("{p}[adaptive]\nmargin = 0.5\n"), "adaptive.margin", "0.5"),
            (&format!("{p}[adaptive]\nruns = 0\n"), "adaptive.runs", "at least 1"),
        ] {
            let e = RuntimeConfig::parse(text, "rt.toml").unwrap_err().to_string();
            assert!(
                e.contains("rt.toml") && e.contains(key) && e.contains(words),
                "{text}: {e}"
            );
        }
        let e = RuntimeConfig::load(Path::new("/no/such.toml")).unwrap_err().to_string();
        assert!(e.contains("/no/such.toml"), "{e}");
    }
}
