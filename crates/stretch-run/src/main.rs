//! `stretch-run`: runs a bundle written by `stretch export` from its
//! manifest alone, on the subgraph runtime, with the built-in engines
//! ([`stretch_run::processors`], [`stretch_run::load`]).

use anyhow::{Result, bail};
use clap::Parser;
use engine::tflite::TFLITE_ENTRY;
use engine::{EngineRegistry, Value};
use scheduler_rt::ProcessorConfig;
use scheduler_rt::npy;
use std::path::PathBuf;
use std::time::Instant;
use tract_core::prelude::{IntoTValue, Tensor};

/// Run a stretch bundle (`stretch export`) on this machine.
///
/// Reads BUNDLE_DIR/bundle.json (schema stretch.bundle/2), checks every
/// file against its SHA-256, loads each subgraph file on a worker for its
/// processor as the manifest cuts the model (no partitioning, no model
/// analysis), feeds the reference inputs (or --input) and writes or checks
/// the outputs. Processor i of the manifest runs on core i modulo the
/// cores available: the first on the calling thread, the others on pinned
/// worker threads; --processor overrides one.
#[derive(Parser, Debug)]
#[command(name = "stretch-run", version)]
struct Args {
    /// The bundle directory (holds bundle.json).
    #[arg(value_name = "BUNDLE_DIR")]
    bundle: PathBuf,

    /// Compare the outputs with the bundle's reference outputs (within its
    /// stated tolerance, plus 1e-6 of the largest magnitude for float32
    /// rounding); exit 1 when one differs.
    #[arg(long)]
    check: bool,

    /// Time this many runs after one warm-up and print min and median.
    #[arg(long, default_value_t = 1, value_name = "N")]
    runs: usize,

    /// Engine of every processor not set by --processor (with --format
    /// onnx): tract, or ort (onnxruntime, loaded at run time).
    #[arg(long, default_value = "tract")]
    engine: String,

    /// Which files of the bundle run: the ONNX files on --engine, or the
    /// LiteRT (.tflite) files on tract through stretch's own LiteRT reader
    /// (every processor; --engine and --processor engines are not used),
    /// converted to and from the ONNX files' layouts and types where
    /// subgraphs meet. A runner built without the `onnx` feature runs
    /// tflite only.
    #[arg(long, value_enum, default_value_t = DEFAULT_FORMAT)]
    format: Format,

    /// A processor's worker, as `stretch run` takes it:
    /// `NAME=inline|pool|thread[:CORES][,threads=N][,engine=ort]...`.
    #[arg(long = "processor", value_name = "NAME=SPEC")]
    processors: Vec<String>,

    /// Input tensors (.npy, f32), one per model input, instead of the
    /// reference inputs.
    #[arg(long = "input", value_name = "X.npy")]
    inputs: Vec<PathBuf>,

    /// Write the outputs here (.npy), one per model output.
    #[arg(long = "output", value_name = "Y.npy")]
    outputs: Vec<PathBuf>,
}

/// The files `--format` runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Onnx,
    Tflite,
}

#[cfg(feature = "onnx")]
const DEFAULT_FORMAT: Format = Format::Onnx;
#[cfg(not(feature = "onnx"))]
const DEFAULT_FORMAT: Format = Format::Tflite;

/// The engines of the ONNX files: tract and onnxruntime.
#[cfg(feature = "onnx")]
fn onnx_engines() -> Result<EngineRegistry> {
    Ok(EngineRegistry::builtin())
}

/// The ONNX files of `b` on the runtime.
#[cfg(feature = "onnx")]
fn load_onnx(
    b: &bundle::Bundle,
    configs: &[ProcessorConfig],
    engines: EngineRegistry,
) -> Result<scheduler_rt::Runtime> {
    Ok(stretch_run::load(b, configs, engines)?)
}

#[cfg(not(feature = "onnx"))]
const NO_ONNX: &str = "--format onnx: this stretch-run was built without its ONNX loader (cargo feature `onnx`); it runs a bundle's LiteRT files (--format tflite)";

#[cfg(not(feature = "onnx"))]
fn onnx_engines() -> Result<EngineRegistry> {
    bail!(NO_ONNX)
}

#[cfg(not(feature = "onnx"))]
fn load_onnx(_: &bundle::Bundle, _: &[ProcessorConfig], _: EngineRegistry) -> Result<scheduler_rt::Runtime> {
    bail!(NO_ONNX)
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
        std::process::exit(1);
    }
}

fn value(a: npy::Array) -> Result<Value> {
    Ok(Tensor::from_shape(&a.shape, &a.data)?.into_tvalue())
}

fn run(args: Args) -> Result<()> {
    let b = bundle::Bundle::open(&args.bundle)?;
    let m = &b.manifest;
    let mut references = Vec::new();
    for (i, (r, t)) in m.reference.outputs.iter().zip(&m.outputs).enumerate() {
        let a = b.array(r)?;
        if a.shape != t.shape {
            bail!(
                "{}: reference output {i} has shape {:?}; the manifest's output `{}` is {:?}",
                b.path(r).display(),
                a.shape,
                t.name,
                t.shape
            );
        }
        references.push(a.data);
    }
    let (engines, engine) = match args.format {
        Format::Onnx => (onnx_engines()?, args.engine.as_str()),
        Format::Tflite => (EngineRegistry::empty().with(TFLITE_ENTRY), TFLITE_ENTRY.name),
    };
    let configs = stretch_run::processors(m, engine, &args.processors, &engines)?;
    let rt = match args.format {
        Format::Onnx => load_onnx(&b, &configs, engines)?,
        Format::Tflite => stretch_run::load_tflite(&b, &configs, engines)?,
    };
    let inputs: Vec<Value> = if args.inputs.is_empty() {
        m.reference
            .inputs
            .iter()
            .map(|f| value(b.array(f)?))
            .collect::<Result<_>>()?
    } else {
        if args.inputs.len() != m.inputs.len() {
            bail!("{} inputs given; the model takes {}", args.inputs.len(), m.inputs.len());
        }
        args.inputs
            .iter()
            .map(|p| value(npy::read(p)?))
            .collect::<Result<_>>()?
    };
    let outputs = rt.run(inputs.clone())?;
    let mut times = Vec::new();
    if args.runs > 1 {
        for _ in 0..args.runs {
            let t = Instant::now();
            rt.run(inputs.clone())?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let median = graph_ir::stats::quantile(&times, 0.5).unwrap_or(f64::NAN);
        let min = times.iter().cloned().fold(f64::INFINITY, f64::min);
        println!("{} runs: min {min:.3} ms, median {median:.3} ms (measured)", args.runs);
    }
    println!(
        "ran {} ({} subgraphs on {}) for {}",
        m.model,
        m.subgraphs.len(),
        configs.iter().map(ProcessorConfig::spec).collect::<Vec<_>>().join(" "),
        m.device
    );
    let values: Vec<Vec<f32>> = outputs
        .iter()
        .map(|o| o.to_plain_array_view::<f32>().map(|a| a.iter().copied().collect()))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("an output is not f32: {e}"))?;
    for (path, (v, t)) in args.outputs.iter().zip(values.iter().zip(&m.outputs)) {
        npy::write(
            path,
            &npy::Array {
                shape: t.shape.clone(),
                data: v.clone(),
            },
        )?;
        println!("wrote {}", path.display());
    }
    if args.check {
        check(m, &references, &values)?;
    }
    Ok(())
}

/// Fails on an output further from its reference than the manifest's
/// tolerance, and on any NaN or infinity in an output or a reference
/// (a comparison with NaN is never over a tolerance); a manifest without
/// outputs never opens ([`bundle::Manifest::check`]).
fn check(m: &bundle::Manifest, references: &[Vec<f32>], values: &[Vec<f32>]) -> Result<()> {
    let r = &m.reference;
    for (i, ((f, want), v)) in r.outputs.iter().zip(references).zip(values).enumerate() {
        let name = &m.outputs[i].name;
        if want.len() != v.len() {
            bail!(
                "output {i} (`{name}`): {} values, the reference {}",
                v.len(),
                want.len()
            );
        }
        if let Some(k) = v.iter().position(|x| !x.is_finite()) {
            bail!("check failed: output {i} (`{name}`) holds {} at element {k}", v[k]);
        }
        if let Some(k) = want.iter().position(|x| !x.is_finite()) {
            bail!(
                "check failed: reference output {i} (`{name}`, {}) holds {} at element {k}",
                f.file,
                want[k]
            );
        }
        let peak = want.iter().fold(0.0f32, |a, x| a.max(x.abs()));
        // float32 rounding on top: a one-step difference reads as 1.0000001 steps.
        let tol = r.atol + r.rtol * peak + 1e-6 * peak;
        let worst = want.iter().zip(v).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        if worst > tol {
            bail!(
                "check failed: output {i} (`{name}`) differs from {} by up to {worst:e}, over the tolerance {tol:e} ({})",
                f.file,
                r.computed_by
            );
        }
        println!(
            "check: output {i} (`{name}`) within {worst:.3e} of the reference (tolerance {tol:.3e}; {})",
            r.computed_by
        );
    }
    Ok(())
}
