//! Fuzzes the ONNX importer: any bytes must import or fail with an error,
//! never panic, and an imported graph must export and analyse without panicking.

#![no_main]

use bytes::Bytes;
use graph_ir::onnx::{ImportOptions, export_bytes, import_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(graph) = import_bytes(Bytes::copy_from_slice(data), "fuzz", &ImportOptions::default()) {
        let _ = export_bytes(&graph);
        let _ = graph_ir::analysis::analyze(&graph);
    }
});
