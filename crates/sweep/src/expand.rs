//! A sweep file expanded into jobs: one per model and seed, each a list of
//! `stretch` command lines (the branching it needs, training, and the
//! quantization-aware fine-tuning of precision `profile`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::spec::{Precision, SweepFile, options_args};

/// One job of a sweep: a model trained at one seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Unique in the sweep: `s{seed}-{label}`.
    pub id: String,
    /// The row label `compare-accuracy` gives the model: `original`,
    /// `branched{N}-{name}`, with `-kd` when distilled.
    pub label: String,
    pub seed: u64,
    /// What is trained: a file, or how the branched model is made.
    pub source: String,
    pub distilled: bool,
    /// `stretch` arguments (without the program), run in order; each
    /// must succeed.
    pub steps: Vec<Vec<String>>,
    /// Jobs that must have succeeded first (a distilled model's teacher).
    pub after: Vec<String>,
    /// The trained fp32 model.
    pub model: PathBuf,
    /// Training's result (`stretch train --json`).
    pub result: PathBuf,
    /// The quantized versions' result (precision `profile`).
    pub quantized: Option<PathBuf>,
    /// Directories the steps write into, made before the job starts.
    pub dirs: Vec<PathBuf>,
}

impl Job {
    /// Files the job writes that a finished job must have.
    pub fn outputs(&self) -> Vec<&Path> {
        let mut out = vec![self.model.as_path(), self.result.as_path()];
        out.extend(self.quantized.as_deref());
        out
    }
}

/// Where the jobs of a sweep write, and `stretch train`'s default learning
/// rate (the default fine-tuning rate is a tenth of the recipe's).
pub struct Layout<'a> {
    /// The sweep directory (absolute when jobs run elsewhere).
    pub dir: &'a Path,
    pub default_lr: f64,
    /// Every job writes into `dir` itself instead of `dir/seed{S}` (for a
    /// sweep of one seed, as `compare-accuracy` lays out its files).
    pub flat: bool,
}

/// A model of the comparison before seeds: its label, source, the
/// steps that make its file (in `dir`) and that file.
struct Variant {
    label: String,
    source: String,
    prepare: Vec<Vec<String>>,
    input: PathBuf,
    branched: bool,
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The steps that write the original for the job labelled `label` into
/// `seed_dir` (none for a file) and the file the job reads.
fn original_for(file: &SweepFile, seed_dir: &Path, label: &str) -> (Vec<Vec<String>>, PathBuf) {
    match file.zoo_name() {
        None => (Vec::new(), file.original.clone()),
        Some(name) => {
            let path = seed_dir.join(format!("{label}.original.onnx"));
            let mut step = vec!["zoo".to_string(), name.to_string()];
            step.extend(options_args(&file.zoo).unwrap_or_default());
            step.extend(["-o".into(), path_arg(&path)]);
            (vec![step], path)
        }
    }
}

/// The models compared, in `compare-accuracy`'s order: the original, then
/// the branched files, plans and stretch merges, numbered from 1; the
/// branching steps write into `seed_dir` (each seed's jobs make their own).
fn variants(file: &SweepFile, seed_dir: &Path) -> Vec<Variant> {
    let (prepare, input) = original_for(file, seed_dir, "original");
    let mut out = vec![Variant {
        label: "original".into(),
        source: path_arg(&file.original),
        prepare,
        input,
        branched: false,
    }];
    let n = |out: &Vec<Variant>| out.len();
    for m in &file.models {
        out.push(Variant {
            label: format!("branched{}-{}", n(&out), stem(m)),
            source: path_arg(m),
            prepare: Vec::new(),
            input: m.clone(),
            branched: true,
        });
    }
    for p in &file.plans {
        let label = format!("branched{}-{}", n(&out), stem(p));
        let input = seed_dir.join(format!("{label}.branched.onnx"));
        let (mut prepare, original) = original_for(file, seed_dir, &label);
        prepare.push(vec![
            "branch".into(),
            path_arg(&original),
            "--plan".into(),
            path_arg(p),
            "-o".into(),
            path_arg(&input),
        ]);
        out.push(Variant {
            source: format!("plan {}", p.display()),
            prepare,
            label,
            input,
            branched: true,
        });
    }
    for s in &file.stretch {
        for (merge, suffix) in s.merges.iter().zip(s.labels()) {
            let label = format!("branched{}-{suffix}", n(&out));
            let input = seed_dir.join(format!("{label}.branched.onnx"));
            let (mut prepare, original) = original_for(file, seed_dir, &label);
            let mut step = vec![
                "stretch".into(),
                path_arg(&original),
                "--device".into(),
                path_arg(&s.device),
                "--merge".into(),
                merge.clone(),
            ];
            step.extend(options_args(&s.options).unwrap_or_default());
            step.extend([
                "--plan-out".into(),
                path_arg(&seed_dir.join(format!("{label}.plan.json"))),
                "-o".into(),
                path_arg(&input),
            ]);
            prepare.push(step);
            out.push(Variant {
                source: format!("stretch --merge {merge} on {}", stem(&s.device)),
                prepare,
                label,
                input,
                branched: true,
            });
        }
    }
    out
}

/// The jobs of `file`, seed by seed: the original and every branched
/// model, then (with `distill`) every branched model again with that
/// seed's trained original as teacher, after the job that branched it.
pub fn expand(file: &SweepFile, layout: &Layout) -> Vec<Job> {
    let recipe = options_args(&file.recipe).unwrap_or_default();
    let profile = file.precisions.contains(&Precision::Profile);
    let mut jobs = Vec::new();
    for &seed in &file.seeds {
        let seed_dir = if layout.flat {
            layout.dir.to_path_buf()
        } else {
            layout.dir.join(format!("seed{seed}"))
        };
        let original_model = seed_dir.join("original.onnx");
        let variants = variants(file, &seed_dir);
        let waves: &[bool] = if file.distill { &[false, true] } else { &[false] };
        for &distilled in waves {
            for v in &variants {
                if distilled && !v.branched {
                    continue;
                }
                let label = if distilled {
                    format!("{}-kd", v.label)
                } else {
                    v.label.clone()
                };
                let model = seed_dir.join(format!("{label}.onnx"));
                let result = seed_dir.join(format!("{label}.json"));
                let mut steps: Vec<Vec<String>> = if distilled { Vec::new() } else { v.prepare.clone() };
                let mut train = vec![
                    "train".into(),
                    path_arg(&v.input),
                    "--dataset".into(),
                    file.dataset.clone(),
                ];
                train.extend(recipe.iter().cloned());
                train.extend(["--seed".into(), seed.to_string()]);
                if !file.keep_weights {
                    train.push("--reinitialise".into());
                }
                if distilled {
                    train.extend(["--teacher".into(), path_arg(&original_model)]);
                    if let Some(a) = file.kd_alpha {
                        train.extend(["--kd-alpha".into(), a.to_string()]);
                    }
                    if let Some(t) = file.kd_temperature {
                        train.extend(["--kd-temperature".into(), t.to_string()]);
                    }
                }
                train.extend(["-o".into(), path_arg(&model), "--json".into(), path_arg(&result)]);
                steps.push(train);
                let quantized = (profile && v.branched && !distilled).then(|| {
                    let (step, json) = qat_step(file, layout, &seed_dir, &label, seed);
                    steps.push(step);
                    json
                });
                jobs.push(Job {
                    id: format!("s{seed}-{label}"),
                    label,
                    seed,
                    source: v.source.clone(),
                    distilled,
                    steps,
                    after: if distilled {
                        vec![format!("s{seed}-original"), format!("s{seed}-{}", v.label)]
                    } else {
                        vec![]
                    },
                    model,
                    result,
                    quantized,
                    dirs: vec![seed_dir.clone()],
                });
            }
        }
    }
    jobs
}

/// `stretch train --precision profile` fine-tuning the trained model
/// `{label}.onnx` in `dir` into `{label}-qat.onnx` (the model quantized
/// before fine-tuning beside it as `{label}-ptq.onnx`), its recipe the
/// sweep's with `qat`'s epochs and learning rate; and the result file it
/// writes, `{label}-quantized.json`.
fn qat_step(file: &SweepFile, layout: &Layout, dir: &Path, label: &str, seed: u64) -> (Vec<String>, PathBuf) {
    let at = |suffix: &str| dir.join(format!("{label}{suffix}"));
    let json = at("-quantized.json");
    let mut recipe = file.recipe.clone();
    let lr = recipe
        .iter()
        .find(|(k, _)| k.as_str() == "lr")
        .and_then(|(_, v)| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
        .unwrap_or(layout.default_lr);
    recipe.retain(|k, _| !matches!(k.as_str(), "lr" | "epochs"));
    let mut step = vec![
        "train".into(),
        path_arg(&at(".onnx")),
        "--dataset".into(),
        file.dataset.clone(),
    ];
    step.extend(options_args(&recipe).unwrap_or_default());
    step.extend([
        "--epochs".into(),
        file.qat.epochs.to_string(),
        "--lr".into(),
        file.qat.lr.unwrap_or(lr / 10.0).to_string(),
    ]);
    step.extend(options_args(&file.qat.options).unwrap_or_default());
    step.extend([
        "--seed".into(),
        seed.to_string(),
        "--precision".into(),
        "profile".into(),
        "--device".into(),
        file.device.as_deref().map(path_arg).unwrap_or_default(),
        "--ptq".into(),
        path_arg(&at("-ptq.onnx")),
        "-o".into(),
        path_arg(&at("-qat.onnx")),
        "--json".into(),
        path_arg(&json),
    ]);
    (step, json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (SweepFile, PathBuf) {
        let dir = std::env::temp_dir().join(format!("sweep-expand-{}-{}", std::process::id(), text.len()));
        std::fs::create_dir_all(&dir).expect("dir");
        for f in ["o.onnx", "b.onnx", "p.plan.json", "d.toml"] {
            std::fs::write(dir.join(f), b"x").expect("file");
        }
        std::fs::write(dir.join("s.toml"), text).expect("write");
        (SweepFile::load(&dir.join("s.toml")).expect("valid"), dir)
    }

    #[test]
    fn models_times_seeds_with_distilled_jobs_after_their_teacher() {
        let (f, dir) = file(
            "dataset = \"digits\"\noriginal = \"o.onnx\"\nmodels = [\"b.onnx\"]\nplans = [\"p.plan.json\"]\n\
             seeds = [0, 7]\ndistill = true\nprecisions = [\"fp32\", \"profile\"]\ndevice = \"d.toml\"\n\
             [recipe]\nepochs = 1\nlr = 0.2\n",
        );
        let out = dir.join("out");
        let jobs = expand(
            &f,
            &Layout {
                dir: &out,
                default_lr: 0.05,
                flat: false,
            },
        );
        let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "s0-original",
                "s0-branched1-b",
                "s0-branched2-p.plan",
                "s0-branched1-b-kd",
                "s0-branched2-p.plan-kd",
                "s7-original",
                "s7-branched1-b",
                "s7-branched2-p.plan",
                "s7-branched1-b-kd",
                "s7-branched2-p.plan-kd",
            ]
        );
        let kd = &jobs[8];
        assert_eq!(kd.after, ["s7-original", "s7-branched1-b"]);
        assert_eq!(
            jobs[9].steps.len(),
            1,
            "the branched file is the undistilled job's: {:?}",
            jobs[9].steps
        );
        let train = kd.steps.last().expect("train step").join(" ");
        assert!(
            train.contains(&format!("--teacher {}", out.join("seed7/original.onnx").display())),
            "{train}"
        );
        assert!(train.contains("--seed 7 --reinitialise"), "{train}");
        let planned = &jobs[2];
        assert_eq!(planned.steps.len(), 3, "branch, train, fine-tune: {:?}", planned.steps);
        assert_eq!(planned.steps[0][0], "branch");
        let qat = planned.steps[2].join(" ");
        assert!(
            qat.contains("--epochs 2 --lr 0.02") && qat.contains("--precision profile"),
            "{qat}"
        );
        assert!(!qat.contains("--epochs 1"), "{qat}");
        assert!(jobs[0].quantized.is_none() && jobs[3].quantized.is_none());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_zoo_original_is_built_in_each_job_that_reads_it() {
        let (f, dir) = file(
            "dataset = \"digits\"\noriginal = \"zoo:resnet-mini\"\n[zoo]\ninput_size = 28\n\
             [[stretch]]\ndevice = \"d.toml\"\nmerges = [\"project\", \"concat\"]\n\
             [[stretch]]\nname = \"small\"\ndevice = \"d.toml\"\nmerges = [\"project\"]\n",
        );
        let out = dir.join("out");
        let jobs = expand(
            &f,
            &Layout {
                dir: &out,
                default_lr: 0.05,
                flat: false,
            },
        );
        let labels: Vec<&str> = jobs.iter().map(|j| j.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "original",
                "branched1-project",
                "branched2-concat",
                "branched3-small-project"
            ]
        );
        let zoo = out.join("seed0/branched3-small-project.original.onnx");
        let steps = &jobs[3].steps;
        assert_eq!(
            steps[0],
            ["zoo", "resnet-mini", "--input-size", "28", "-o", &zoo.to_string_lossy()],
            "{steps:?}"
        );
        assert_eq!(
            steps[1][..2],
            ["stretch".to_string(), zoo.to_string_lossy().into_owned()]
        );
        assert_eq!(jobs[0].steps[0][0], "zoo");
        assert_eq!(
            jobs[0].steps[1][1],
            out.join("seed0/original.original.onnx").to_string_lossy()
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
