//! Runs a model in tract as the runtime compiles it (`tract_model`, so a
//! quantized file is rewritten by `fuse_qdq`, then optimised) on one input
//! and writes the named values, float32 (`DIR/<index>.npy`, in the order
//! of NAMES, one name a line): to compare tract's intermediate values
//! with another evaluator's.
//!
//! cargo run -p scheduler-rt --example tract_values -- MODEL.onnx IN.npy NAMES DIR

use tract_onnx::prelude::*;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, input, names, dir] = args.as_slice() else {
        return Err("usage: tract_values MODEL.onnx IN.npy NAMES DIR".into());
    };
    let bytes = std::fs::read(model).map_err(|e| format!("{model}: {e}"))?;
    let x = scheduler_rt::npy::read(std::path::Path::new(input)).map_err(|e| e.to_string())?;
    let names: Vec<String> = std::fs::read_to_string(names)
        .map_err(|e| format!("{names}: {e}"))?
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let mut m = engine::tract_model(&bytes).map_err(|e| format!("{e:#}"))?;
    if !names.is_empty() {
        m.select_outputs_by_name(&names).map_err(|e| format!("{e:#}"))?;
    }
    let plan = m
        .into_optimized()
        .and_then(|m| m.into_runnable())
        .map_err(|e| format!("{e:#}"))?;
    let t = Tensor::from_shape(&x.shape, &x.data).map_err(|e| e.to_string())?;
    let out = plan.run(tvec!(t.into_tvalue())).map_err(|e| format!("{e:#}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
    for (i, v) in out.iter().enumerate() {
        let f = v.cast_to::<f32>().map_err(|e| e.to_string())?;
        let view = f.to_plain_array_view::<f32>().map_err(|e| e.to_string())?;
        let a = scheduler_rt::npy::Array {
            shape: view.shape().to_vec(),
            data: view.iter().copied().collect(),
        };
        let path = std::path::Path::new(dir).join(format!("{i}.npy"));
        scheduler_rt::npy::write(&path, &a).map_err(|e| e.to_string())?;
    }
    println!("{} values written to {dir}", out.len());
    Ok(())
}
