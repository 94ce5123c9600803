//! Writes the file tract runs for a quantized model: `fuse_qdq`'s rewrite
//! of onnxruntime's fused integer arithmetic into standard ONNX operators.
//!
//! `cargo run -p graph-ir --example fuse_qdq -- IN.onnx OUT.onnx`

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, input, output] = args.as_slice() else {
        eprintln!("usage: fuse_qdq IN.onnx OUT.onnx");
        std::process::exit(2);
    };
    let bytes = std::fs::read(input).unwrap_or_else(|e| {
        eprintln!("error: {input}: {e}");
        std::process::exit(1)
    });
    let fused = graph_ir::onnx::fuse_qdq(&bytes).map_or(bytes, |(b, _)| b);
    if let Err(e) = std::fs::write(output, fused) {
        eprintln!("error: {output}: {e}");
        std::process::exit(1);
    }
}
