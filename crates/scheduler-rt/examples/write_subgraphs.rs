//! Writes the subgraphs the runtime would compile for a model, one ONNX file
//! each (`DIR/<index>-<processor>.onnx`, in the partition's topological
//! order), and prints their names, node counts and boundary values, so that
//! an engine can be timed on them outside the runtime.
//!
//! cargo run --release -p scheduler-rt --example write_subgraphs -- MODEL.onnx DIR [DEFAULT_PROCESSOR]

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: write_subgraphs MODEL.onnx DIR [DEFAULT_PROCESSOR]".into());
    }
    let graph = graph_ir::onnx::import_file(&args[1], &Default::default()).map_err(|e| format!("{}: {e}", args[1]))?;
    let default = args.get(3).map(String::as_str).unwrap_or("cpu0");
    let parts = scheduler_rt::partition(&graph, default).map_err(|e| format!("{}: {e}", args[1]))?;
    std::fs::create_dir_all(&args[2]).map_err(|e| format!("{}: {e}", args[2]))?;
    for (i, sub) in parts.subgraphs.iter().enumerate() {
        let bytes = scheduler_rt::extract_onnx(&graph, sub).map_err(|e| e.to_string())?;
        let path = format!("{}/{i:02}-{}.onnx", args[2], sub.processor);
        std::fs::write(&path, bytes).map_err(|e| format!("{path}: {e}"))?;
        println!(
            "{path}: {} nodes, {} inputs, {} outputs",
            sub.nodes.len(),
            sub.inputs.len(),
            sub.outputs.len()
        );
    }
    Ok(())
}
