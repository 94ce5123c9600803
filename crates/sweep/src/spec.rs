//! The sweep file (TOML): which models are trained, at which seeds and
//! precisions, with which recipe and dataset.
//!
//! ```toml
//! dataset = "mnist:/usr/share/datasets/fashion-mnist"
//! original = "resnet-mini.onnx"        # gaps are measured against it;
//!                                      # or "zoo:NAME" with `[zoo]` options
//! models = ["resnet-mini-branched.onnx"]
//! plans = ["resnet-mini.plan.json"]    # applied to the original (`stretch branch`)
//! seeds = [0, 1]
//! precisions = ["fp32", "profile"]      # profile: also PTQ and QAT rows
//! device = "configs/devices/snapdragon855.toml"
//! distill = false
//!
//! [[stretch]]                           # branched by `stretch stretch`, one per merge
//! device = "configs/devices/host.toml"
//! merges = ["project", "concat"]
//! options = { alpha = 1, capacity = "1.0,1.2" }
//! [[stretch]]                           # another search: labelled `{name}-{merge}`
//! name = "cap0.8"
//! device = "configs/devices/host.toml"
//! merges = ["project"]
//! options = { alpha = 1, capacity = "0.8,1.2" }
//!
//! [recipe]                              # `stretch train` options
//! epochs = 10
//! limit = 3000
//!
//! [qat]                                 # fine-tuning of precision "profile"
//! epochs = 2
//! ```
//!
//! Relative paths are taken from the sweep file's directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::SweepError;

/// A `stretch train` option value: a flag (`true`), a number or a string.
pub type Options = BTreeMap<String, toml::Value>;

/// What a sweep trains; see the module documentation for the format.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// `stretch train`'s `--dataset` (`digits`, `mnist:DIR`, ...).
    pub dataset: String,
    /// The original model: every branched model's gap is measured against
    /// it. `zoo:NAME` builds it with `stretch zoo NAME` and the `[zoo]`
    /// options in each job that needs it.
    pub original: PathBuf,
    /// `stretch zoo` options of a `zoo:NAME` original (`input_size`, `classes`, `seed`).
    #[serde(default)]
    pub zoo: Options,
    /// Branched models already written (`stretch branch`).
    #[serde(default)]
    pub models: Vec<PathBuf>,
    /// Plans (`stretch plan -o`) applied to the original before training.
    #[serde(default)]
    pub plans: Vec<PathBuf>,
    /// Branched models searched by `stretch stretch`, one per merge of each
    /// search.
    #[serde(default)]
    pub stretch: Vec<StretchSpec>,
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// `fp32` (always trained first) and optionally `profile`: each branched
    /// model also quantized for `device` after training and after
    /// quantization-aware fine-tuning.
    #[serde(default = "default_precisions")]
    pub precisions: Vec<Precision>,
    /// The device profile whose precisions `profile` applies.
    #[serde(default)]
    pub device: Option<PathBuf>,
    /// Also train each branched model with the trained original as teacher.
    #[serde(default)]
    pub distill: bool,
    /// With `distill`: weight of the teacher's soft labels [default: train's].
    #[serde(default)]
    pub kd_alpha: Option<f64>,
    /// With `distill`: distillation temperature [default: train's].
    #[serde(default)]
    pub kd_temperature: Option<f64>,
    /// Train from the files' weights instead of re-initialising them.
    #[serde(default)]
    pub keep_weights: bool,
    /// `stretch train` options, by their long names without dashes.
    #[serde(default)]
    pub recipe: Options,
    /// The fine-tuning of precision `profile`.
    #[serde(default)]
    pub qat: Qat,
}

/// Branched variants that `stretch stretch` searches for a device.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StretchSpec {
    /// Labels this search's models `{name}-{merge}` (default: `{merge}`).
    #[serde(default)]
    pub name: Option<String>,
    pub device: PathBuf,
    pub merges: Vec<String>,
    /// Further `stretch stretch` options (`alpha`, `capacity`, ...).
    #[serde(default)]
    pub options: Options,
}

/// Quantization-aware fine-tuning of each trained branched model.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Qat {
    #[serde(default = "default_qat_epochs")]
    pub epochs: u64,
    /// Peak learning rate [default: the recipe's lr / 10].
    #[serde(default)]
    pub lr: Option<f64>,
    /// Further options of the fine-tuning run (`calibration-samples`, ...).
    #[serde(default)]
    pub options: Options,
}

impl Default for Qat {
    fn default() -> Self {
        Qat {
            epochs: default_qat_epochs(),
            lr: None,
            options: Options::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Profile,
}

fn default_seeds() -> Vec<u64> {
    vec![0]
}

fn default_precisions() -> Vec<Precision> {
    vec![Precision::Fp32]
}

fn default_qat_epochs() -> u64 {
    2
}

/// Recipe keys the sweep sets itself, with where they come from.
const RESERVED: &[(&str, &str)] = &[
    ("seed", "the sweep's `seeds`"),
    ("dataset", "the sweep's `dataset`"),
    ("out", "the sweep directory"),
    ("json", "the sweep directory"),
    ("metrics", "the sweep directory"),
    ("curve", "the sweep directory"),
    ("checkpoint", "the sweep directory"),
    ("resume", "the sweep directory"),
    ("stop-after", "the sweep"),
    ("reinitialise", "the sweep's `keep_weights`"),
    ("teacher", "the sweep's `distill`"),
    ("kd-alpha", "the sweep's `kd_alpha`"),
    ("kd-temperature", "the sweep's `kd_temperature`"),
    ("precision", "the sweep's `precisions`"),
    ("device", "the sweep's `device`"),
];

impl SweepFile {
    /// Reads and checks `path`; relative paths in it become paths from its
    /// directory. Errors name the file and the key at fault.
    pub fn load(path: &Path) -> Result<SweepFile, SweepError> {
        let text = std::fs::read_to_string(path).map_err(|error| SweepError::Io {
            action: "read",
            path: path.to_path_buf(),
            error,
        })?;
        let spec_err = |reason: String| SweepError::Spec {
            path: path.to_path_buf(),
            reason,
        };
        let mut file: SweepFile = toml::from_str(&text).map_err(|e| spec_err(e.to_string().trim_end().to_string()))?;
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let base = base.canonicalize().map_err(|error| SweepError::Io {
            action: "resolve the directory of",
            path: path.to_path_buf(),
            error,
        })?;
        file.resolve(&base);
        file.check().map_err(spec_err)?;
        Ok(file)
    }

    fn resolve(&mut self, base: &Path) {
        let at = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
            if let Ok(c) = p.canonicalize() {
                *p = c;
            }
        };
        if self.zoo_name().is_none() {
            at(&mut self.original);
        }
        self.models.iter_mut().for_each(at);
        self.plans.iter_mut().for_each(at);
        if let Some(d) = &mut self.device {
            at(d);
        }
        for s in &mut self.stretch {
            at(&mut s.device);
        }
        if let Some((kind, rest)) = self.dataset.split_once(':')
            && Path::new(rest).is_relative()
        {
            self.dataset = format!("{kind}:{}", base.join(rest).display());
        }
    }

    /// What is wrong with the file beyond its syntax: missing files, empty
    /// or repeated lists, options the sweep sets itself, `profile` without
    /// a device.
    fn check(&self) -> Result<(), String> {
        let mut files = Vec::new();
        if self.zoo_name().is_none() {
            files.push(("original", &self.original));
        } else if self.zoo.keys().any(|k| normalise(k) == "out") {
            return Err("`zoo.out` is set by the sweep".into());
        }
        if self.zoo_name().is_none() && !self.zoo.is_empty() {
            return Err("`[zoo]` options apply to an original given as \"zoo:NAME\"".into());
        }
        files.extend(self.models.iter().map(|m| ("models", m)));
        files.extend(self.plans.iter().map(|p| ("plans", p)));
        files.extend(self.device.iter().map(|d| ("device", d)));
        files.extend(self.stretch.iter().map(|s| ("stretch.device", &s.device)));
        for (key, file) in files {
            match std::fs::metadata(file) {
                Ok(m) if m.is_file() => {}
                Ok(_) => return Err(format!("`{key}`: {} is not a plain file", file.display())),
                Err(_) => return Err(format!("`{key}`: {} does not exist", file.display())),
            }
        }
        if let Some((kind, data)) = self.dataset.split_once(':')
            && !Path::new(data).exists()
        {
            return Err(format!(
                "`dataset`: {data} does not exist (`{kind}:PATH` names a path this machine and every node see)"
            ));
        }
        if self.seeds.is_empty() {
            return Err("`seeds` is empty: give at least one seed".into());
        }
        if let Some(s) = repeated(&self.seeds) {
            return Err(format!("`seeds` lists {s} twice"));
        }
        if !self.precisions.contains(&Precision::Fp32) {
            return Err("`precisions` must include \"fp32\": every model is trained in fp32 first".into());
        }
        if self.precisions.contains(&Precision::Profile) && self.device.is_none() {
            return Err("`precisions` includes \"profile\": set `device` to the profile whose precisions apply".into());
        }
        if !self.precisions.contains(&Precision::Profile) && self.device.is_some() {
            return Err("`device` gives precisions only with \"profile\" in `precisions`".into());
        }
        if !self.distill && (self.kd_alpha.is_some() || self.kd_temperature.is_some()) {
            return Err("`kd_alpha` and `kd_temperature` weight a teacher: they need `distill = true`".into());
        }
        let labels: Vec<String> = self.stretch.iter().flat_map(StretchSpec::labels).collect();
        if let Some(l) = repeated(&labels) {
            return Err(format!(
                "`stretch`: two searches make models labelled {l}: give them distinct `name`s"
            ));
        }
        for s in &self.stretch {
            if s.merges.is_empty() {
                return Err("`stretch.merges` is empty: give at least one merge (project, concat)".into());
            }
            for key in ["device", "merge", "out", "plan-out", "seed"] {
                if s.options.keys().any(|k| normalise(k) == key) {
                    return Err(format!("`stretch.options.{key}` is set by the sweep"));
                }
            }
        }
        if self.models.is_empty() && self.plans.is_empty() && self.stretch.is_empty() {
            return Err("nothing to compare: give `models`, `plans` or a `[[stretch]]` table".into());
        }
        for table in [("recipe", &self.recipe), ("qat.options", &self.qat.options)] {
            for key in table.1.keys() {
                if let Some((_, by)) = RESERVED.iter().find(|(r, _)| *r == normalise(key)) {
                    return Err(format!("`{}.{key}` is set by {by}", table.0));
                }
            }
        }
        for key in ["epochs", "lr"] {
            if self.qat.options.keys().any(|k| normalise(k) == key) {
                return Err(format!("`qat.options.{key}`: set `qat.{key}` instead"));
            }
        }
        options_args(&self.recipe).map_err(|e| format!("`recipe`: {e}"))?;
        options_args(&self.qat.options).map_err(|e| format!("`qat.options`: {e}"))?;
        for s in &self.stretch {
            options_args(&s.options).map_err(|e| format!("`stretch.options`: {e}"))?;
        }
        options_args(&self.zoo).map_err(|e| format!("`zoo`: {e}"))?;
        Ok(())
    }
}

impl SweepFile {
    /// The zoo model of a `zoo:NAME` original.
    pub fn zoo_name(&self) -> Option<&str> {
        self.original.to_str()?.strip_prefix("zoo:")
    }
}

impl StretchSpec {
    /// The label suffix of each merge's model.
    pub fn labels(&self) -> Vec<String> {
        self.merges
            .iter()
            .map(|m| match &self.name {
                Some(n) => format!("{n}-{m}"),
                None => m.clone(),
            })
            .collect()
    }
}

fn repeated<T: PartialEq + std::fmt::Debug>(items: &[T]) -> Option<String> {
    items
        .iter()
        .enumerate()
        .find(|(i, x)| items[..*i].contains(x))
        .map(|(_, x)| format!("{x:?}"))
}

/// An option name with `_` written as `-`.
pub fn normalise(key: &str) -> String {
    key.replace('_', "-")
}

/// `options` as command-line arguments: `--key VALUE`, `--key` for `true`,
/// nothing for `false`; arrays and tables are refused naming the key.
pub fn options_args(options: &Options) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    for (key, value) in options {
        let flag = format!("--{}", normalise(key));
        match value {
            toml::Value::Boolean(true) => args.push(flag),
            toml::Value::Boolean(false) => {}
            toml::Value::String(s) => args.extend([flag, s.clone()]),
            toml::Value::Integer(i) => args.extend([flag, i.to_string()]),
            toml::Value::Float(f) => args.extend([flag, f.to_string()]),
            other => {
                return Err(format!(
                    "`{key}` is of type {}; give a flag (true), a number or a string (lists as \"a,b\")",
                    other.type_str()
                ));
            }
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SweepFile, SweepError> {
        let dir = std::env::temp_dir().join(format!("sweep-spec-{}-{}", std::process::id(), text.len()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("m.onnx"), b"x").expect("file");
        let path = dir.join("s.toml");
        std::fs::write(&path, text).expect("write");
        let r = SweepFile::load(&path);
        std::fs::remove_dir_all(&dir).ok();
        r
    }

    #[test]
    fn a_sweep_file_is_checked_naming_the_key_at_fault() {
        let ok = "dataset = \"digits\"\noriginal = \"m.onnx\"\nmodels = [\"m.onnx\"]\n";
        let file = parse(ok).expect("valid");
        assert_eq!(file.seeds, [0]);
        assert!(file.original.is_absolute() || file.original.starts_with(std::env::temp_dir()));
        let cases = [
            ("\nepoch = 3\n", "unknown field `epoch`"),
            ("\nseeds = []\n", "`seeds` is empty"),
            ("\nseeds = [1, 1]\n", "lists 1 twice"),
            ("\nprecisions = [\"profile\"]\n", "must include \"fp32\""),
            ("\nprecisions = [\"fp32\", \"profile\"]\n", "set `device`"),
            ("\nprecisions = [\"int4\"]\n", "unknown variant `int4`"),
            ("\n[recipe]\nseed = 3\n", "`recipe.seed` is set by the sweep's `seeds`"),
            (
                "\n[recipe]\nout_dir = \"x\"\nbatch_size = [1]\n",
                "`batch_size` is of type array",
            ),
            ("\n[qat.options]\nepochs = 3\n", "set `qat.epochs` instead"),
        ];
        let err = parse("dataset = \"mnist:/nonexistent\"\noriginal = \"m.onnx\"\nmodels = [\"m.onnx\"]\n")
            .expect_err("missing dataset")
            .to_string();
        assert!(err.contains("`dataset`: /nonexistent does not exist"), "{err}");
        for (extra, want) in cases {
            let err = parse(&format!("{ok}{extra}")).expect_err(extra).to_string();
            assert!(err.contains(want), "{extra:?}: {err}");
            assert!(err.contains("s.toml"), "{err}");
        }
        let err = parse("dataset = \"digits\"\noriginal = \"missing.onnx\"\nmodels = [\"m.onnx\"]\n")
            .expect_err("missing file")
            .to_string();
        assert!(err.contains("`original`") && err.contains("missing.onnx"), "{err}");
    }

    #[test]
    fn options_become_arguments() {
        let mut o = Options::new();
        o.insert("batch_size".into(), toml::Value::Integer(32));
        o.insert("augment".into(), toml::Value::String("flip".into()));
        o.insert("phase-times".into(), toml::Value::Boolean(true));
        o.insert("distill".into(), toml::Value::Boolean(false));
        o.insert("lr".into(), toml::Value::Float(0.05));
        assert_eq!(
            options_args(&o).expect("args"),
            [
                "--augment",
                "flip",
                "--batch-size",
                "32",
                "--lr",
                "0.05",
                "--phase-times"
            ]
        );
    }
}
