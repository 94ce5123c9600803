//! Writes a two-branch model (branches on `cpu0` and `cpu1`) and its
//! sequential counterpart as ONNX with random weights, for `stretch bench`.
//!
//! Usage: `cargo run -p scheduler-rt --example write_models -- OUT_DIR [WIDTH BLOCKS SIDE]`
//! writes `OUT_DIR/branched.onnx` and `OUT_DIR/original.onnx`.

use scheduler_rt::testing::{branched_sized, sequential_sized};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(args.first().ok_or("usage: write_models OUT_DIR [WIDTH BLOCKS SIDE]")?);
    let num = |i: usize, default: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(args.get(i).map(|s| s.parse()).transpose()?.unwrap_or(default))
    };
    let (width, blocks, side) = (num(1, 32)?, num(2, 2)?, num(3, 112)?);
    std::fs::create_dir_all(&dir)?;
    let branched = branched_sized(width, blocks, &["cpu0", "cpu1"], side)?;
    let original = sequential_sized(width, blocks, side)?;
    graph_ir::onnx::export_file(&branched, dir.join("branched.onnx"))?;
    graph_ir::onnx::export_file(&original, dir.join("original.onnx"))?;
    println!(
        "wrote {} and {} (width {width}, {blocks} blocks per branch, input {side}x{side})",
        dir.join("branched.onnx").display(),
        dir.join("original.onnx").display()
    );
    Ok(())
}
