//! Writing a bundle: the runtime's partition of an annotated model, one
//! ONNX file per subgraph, reference tensors and the manifest.

use crate::error::BundleError;
use crate::manifest::{FileRef, MANIFEST, Manifest, Processor, Reference, SCHEMA, Subgraph, TensorSpec};
use crate::options::Options;
use crate::staging::Staging;
use graph_ir::{Graph, Op, Outlet};
use predictor::profile::ProcessorKind;
use scheduler_rt::{Partition, npy};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// The name a bundle gives the value at `o`, in the manifest and in the
/// subgraph files alike ([`scheduler_rt::extract::value_name`]).
pub fn tensor_name(g: &Graph, o: Outlet) -> String {
    scheduler_rt::value_name(g, o)
}

fn spec(g: &Graph, o: Outlet) -> Result<TensorSpec, BundleError> {
    let fact = g.fact(o).ok_or_else(|| BundleError::Export {
        reason: format!("value `{}` has no known type and shape", tensor_name(g, o)),
    })?;
    Ok(TensorSpec {
        name: tensor_name(g, o),
        dtype: fact.dtype.to_string(),
        shape: fact.shape.clone(),
    })
}

fn write_file(dir: &Path, file: &str, bytes: &[u8]) -> Result<FileRef, BundleError> {
    let path = dir.join(file);
    std::fs::write(&path, bytes).map_err(|e| BundleError::io("write", &path, e))?;
    Ok(FileRef::of_bytes(file, bytes))
}

/// The onnxruntime execution provider a phone runs processors of `kind` on.
fn provider(kind: ProcessorKind) -> (&'static str, Vec<(String, String)>, &'static str) {
    let opt = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    match kind {
        ProcessorKind::Cpu => (
            "XnnpackExecutionProvider",
            opt("intra_op_num_threads", "1"),
            "one thread per processor, pinned to a big core (taskset or sched_setaffinity)",
        ),
        ProcessorKind::Gpu => (
            "QNNExecutionProvider",
            opt("backend_path", "libQnnGpu.so"),
            "the submitting thread on a little core; the GPU runs the kernels",
        ),
        ProcessorKind::Dsp | ProcessorKind::Npu => (
            "QNNExecutionProvider",
            opt("backend_path", "libQnnHtp.so"),
            "the submitting thread on a little core; the DSP/NPU runs the kernels",
        ),
    }
}

/// Writes the whole bundle of `g` as directory `out`, or nothing:
/// files go to a fresh directory beside it, moved into place when complete
/// ([`Staging`]; `replace` lets a bundle already at `out` be replaced).
/// Errors in the model's own files are reported as exporting `label`.
pub fn write(g: &Graph, label: &str, out: &Path, replace: bool, o: &Options) -> Result<Manifest, BundleError> {
    let staging = Staging::new(out, replace)?;
    let dir = staging.path();
    let mut manifest = files(g, dir, o).map_err(|e| BundleError::Exporting {
        model: label.to_string(),
        source: Box::new(e),
    })?;
    finish(&mut manifest, dir, o)?;
    staging.commit()?;
    Ok(manifest)
}

/// Writes the bundle of `g` into `dir` (created; files of the same names
/// replaced: [`write`] gives a fresh one), after the rewrites its
/// processors need ([`crate::rewrite`]); the reference outputs are those
/// of `g` itself. Processors are listed in the device profile's order.
pub fn export(g: &Graph, dir: &Path, o: &Options) -> Result<Manifest, BundleError> {
    let mut manifest = files(g, dir, o)?;
    finish(&mut manifest, dir, o)?;
    Ok(manifest)
}

/// The `.ort` files when asked and possible, then the manifest, saved once.
fn finish(manifest: &mut Manifest, dir: &Path, o: &Options) -> Result<(), BundleError> {
    if o.ort
        && let Some(py) = crate::ort_format::python()
    {
        crate::ort_format::convert(&py, dir, manifest)?;
    }
    save(manifest, dir)
}

/// Every file but the manifest (and `.ort` files), and the checked manifest.
fn files(g: &Graph, dir: &Path, o: &Options) -> Result<Manifest, BundleError> {
    std::fs::create_dir_all(dir).map_err(|e| BundleError::io("create", dir, e))?;
    let original = g;
    let (rewritten, rewrites) = crate::rewrite::rewrite(g, o.device, o.default_processor)?;
    let g = &rewritten;
    let partition =
        scheduler_rt::partition(g, o.default_processor).map_err(|e| BundleError::Export { reason: e.to_string() })?;
    let (processors, warnings) = processors(g, &partition, o)?;
    let (subgraphs, ops) = subgraph_files(g, &partition, dir, o.tflite)?;
    let input_outlets: Vec<Outlet> = g.inputs().iter().map(|id| id.out(0)).collect();
    let output_outlets: Vec<Outlet> = g.outputs().iter().map(|(_, o)| *o).collect();
    let reference = reference(original, dir, o)?;
    let config = format!(
        "# onnxruntime required-operators configuration (create_reduced_build_config.py format) for {}\nai.onnx;{};{}\n",
        g.name,
        graph_ir::onnx::EXPORT_OPSET,
        ops.into_iter().collect::<Vec<_>>().join(",")
    );
    let required_operators = write_file(dir, "required_operators.config", config.as_bytes())?;
    let manifest = Manifest {
        schema: SCHEMA.into(),
        model: g.name.clone(),
        device: o.device.name.clone(),
        processors,
        inputs: input_outlets.iter().map(|x| spec(g, *x)).collect::<Result<_, _>>()?,
        outputs: output_outlets.iter().map(|x| spec(g, *x)).collect::<Result<_, _>>()?,
        normalisation: o.normalisation.clone(),
        subgraphs,
        rewrites,
        warnings,
        reference,
        required_operators,
    };
    manifest.check()?;
    Ok(manifest)
}

/// The processors the partition runs on, in the device profile's order,
/// and a warning for each whose precision the device does not run.
fn processors(g: &Graph, partition: &Partition, o: &Options) -> Result<(Vec<Processor>, Vec<String>), BundleError> {
    let precisions: HashMap<String, String> = g.precisions().into_iter().collect();
    let mut names: Vec<&str> = partition.processors();
    let rank = |n: &str| o.device.processors.keys().position(|k| k == n);
    names.sort_by_key(|n| rank(n));
    let mut processors = Vec::new();
    let mut warnings = Vec::new();
    for name in names {
        let p = o.device.processors.get(name).ok_or_else(|| BundleError::Export {
            reason: format!(
                "the model runs nodes on processor `{name}`, which device `{}` does not have (it has {})",
                o.device.name,
                o.device.processors.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        })?;
        let (ep, options, pinning) = provider(p.kind);
        let precision = precisions.get(name).cloned().unwrap_or_else(|| "fp32".into());
        let runs: Vec<String> = p.precisions().iter().map(|x| x.to_string()).collect();
        if !runs.contains(&precision) {
            warnings.push(format!(
                "processor `{name}` of {} runs {} only, but the model computes {precision} there: quantize the model for the device first (stretch quantize), or its {ep} back end will not run these files as written",
                o.device.name,
                runs.join(", ")
            ));
        }
        let litert = o.tflite.then(|| crate::litert_files::delegate(p.kind, &precision));
        processors.push(Processor {
            name: name.to_string(),
            kind: format!("{:?}", p.kind).to_lowercase(),
            precision,
            execution_provider: ep.into(),
            provider_options: options,
            pinning: pinning.into(),
            litert,
        });
    }
    Ok((processors, warnings))
}

/// One ONNX file per subgraph of `partition` (and a LiteRT file each when
/// `tflite`), their manifest entries and the operators they use.
fn subgraph_files(
    g: &Graph,
    partition: &Partition,
    dir: &Path,
    tflite: bool,
) -> Result<(Vec<Subgraph>, BTreeSet<&'static str>), BundleError> {
    let mut producer: HashMap<Outlet, String> = HashMap::new();
    let mut subgraphs = Vec::new();
    let mut ops = BTreeSet::new();
    for (i, s) in partition.subgraphs.iter().enumerate() {
        let sub = scheduler_rt::extract(g, s).map_err(|e| BundleError::Export { reason: e.to_string() })?;
        for id in sub.node_ids() {
            let op = &sub.node(id).op;
            if !matches!(op, Op::Input(_) | Op::Const(_)) {
                ops.insert(op.name());
            }
        }
        let bytes = graph_ir::onnx::export_bytes(&sub).map_err(|e| BundleError::Export {
            reason: format!("subgraph {}: {e}", s.name),
        })?;
        let file = format!("sg{i:02}-{}.onnx", s.processor);
        let model = write_file(dir, &file, &bytes)?;
        let tflite_model = if tflite {
            Some(crate::litert_files::write(
                &sub,
                &s.name,
                dir,
                &format!("sg{i:02}-{}.tflite", s.processor),
            )?)
        } else {
            None
        };
        let mut after: Vec<String> = s.inputs.iter().filter_map(|o| producer.get(o).cloned()).collect();
        after.dedup();
        after.sort();
        after.dedup();
        subgraphs.push(Subgraph {
            name: s.name.clone(),
            processor: s.processor.clone(),
            model,
            ort_model: None,
            tflite_model,
            inputs: s.inputs.iter().map(|o| spec(g, *o)).collect::<Result<_, _>>()?,
            outputs: s.outputs.iter().map(|o| spec(g, *o)).collect::<Result<_, _>>()?,
            after,
            meeting_point: s.meeting_point,
        });
        for out in &s.outputs {
            producer.insert(*out, s.name.clone());
        }
    }
    Ok((subgraphs, ops))
}

/// Writes `dir/bundle.json`.
pub fn save(m: &Manifest, dir: &Path) -> Result<(), BundleError> {
    let text = serde_json::to_string_pretty(m).map_err(|e| BundleError::Export { reason: e.to_string() })?;
    write_file(dir, MANIFEST, text.as_bytes()).map(|_| ())
}

/// Reference inputs and the outputs of `g` (the model before any
/// rewrite) for them (tract, whole model).
fn reference(g: &Graph, dir: &Path, o: &Options) -> Result<Reference, BundleError> {
    let inputs: Vec<Outlet> = g.inputs().iter().map(|id| id.out(0)).collect();
    let outputs: Vec<Outlet> = g.outputs().iter().map(|(_, o)| *o).collect();
    let (inputs, outputs) = (&inputs[..], &outputs[..]);
    let tensors = match &o.inputs {
        Some(t) => t.clone(),
        None => uniform(g, inputs)?,
    };
    let mut values: Vec<Vec<f32>> = vec![Vec::new(); outputs.len()];
    scheduler_rt::probe::probe_once(g, outputs, &tensors, |k, v| values[k] = v.to_vec())
        .map_err(|e| BundleError::Export { reason: e.to_string() })?;
    let npy_ref = |file: String, shape: Vec<usize>, data: Vec<f32>| -> Result<FileRef, BundleError> {
        write_file(dir, &file, &npy::to_bytes(&npy::Array { shape, data }))
    };
    let mut refs_in = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        let data = t.to_f32_vec().ok_or_else(|| BundleError::Export {
            reason: format!("reference input {i} ({}) is not f32", t.fact()),
        })?;
        refs_in.push(npy_ref(format!("reference-input{i}.npy"), t.shape().to_vec(), data)?);
    }
    let mut refs_out = Vec::new();
    for (i, (x, v)) in outputs.iter().zip(values).enumerate() {
        let shape = g.fact(*x).map(|f| f.shape.clone()).unwrap_or_default();
        refs_out.push(npy_ref(format!("reference-output{i}.npy"), shape, v)?);
    }
    let atol = outputs.iter().map(|x| output_step(g, *x)).fold(0.0f32, f32::max);
    let rtol = if outputs.iter().any(|x| from_half(g, *x)) {
        FP16_RTOL
    } else if atol > 0.0 {
        0.0
    } else {
        1e-5
    };
    Ok(Reference {
        inputs: refs_in,
        outputs: refs_out,
        computed_by: format!("tract {} on the whole model", engine::TRACT_VERSION),
        rtol,
        atol,
    })
}

/// The tolerance on an output computed in float16, relative to its largest
/// magnitude: four float16 steps there (2⁻⁸). Every host engine computes a
/// float16 operator in float32 and rounds its result to float16
/// ([`graph_ir::onnx::fp16_rounded`]); engines that sum in another order
/// (or a rewrite that does) round a result lying near the middle of two
/// float16 values to the other one, and the step travels to the output.
pub const FP16_RTOL: f32 = 1.0 / 256.0;

/// Whether output `o` is a float16 value, or one cast from float16.
fn from_half(g: &Graph, o: Outlet) -> bool {
    let n = g.node(o.node);
    let half = |x: Outlet| g.fact(x).is_some_and(|f| f.dtype == graph_ir::DType::F16);
    half(o) || (matches!(n.op, Op::Cast(_)) && n.inputs.first().is_some_and(|i| half(*i)))
}

/// One quantization step of output `o` when a DequantizeLinear produces
/// it (the largest scale), else 0.
fn output_step(g: &Graph, o: Outlet) -> f32 {
    let n = g.node(o.node);
    if !matches!(n.op, Op::DequantizeLinear(_)) {
        return 0.0;
    }
    n.inputs
        .get(1)
        .and_then(|s| g.const_tensor(*s))
        .and_then(|t| t.to_f32_vec())
        .map(|v| v.into_iter().fold(0.0f32, f32::max))
        .unwrap_or(0.0)
}

/// Uniform `[-1, 1)` values for each input (f32 only), from a fixed seed.
fn uniform(g: &Graph, inputs: &[Outlet]) -> Result<Vec<graph_ir::Tensor>, BundleError> {
    let mut rng = predictor::forest::SplitMix64::new(0);
    inputs
        .iter()
        .map(|o| {
            let fact = g.fact(*o).ok_or_else(|| BundleError::Export {
                reason: format!("input `{}` has no shape", tensor_name(g, *o)),
            })?;
            if fact.dtype != graph_ir::DType::F32 {
                return Err(BundleError::Export {
                    reason: format!(
                        "input `{}` is {}; reference inputs are f32",
                        tensor_name(g, *o),
                        fact.dtype
                    ),
                });
            }
            Ok(graph_ir::uniform_tensor(fact.shape.clone(), &mut rng))
        })
        .collect()
}
