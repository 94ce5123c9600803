//! Inputs the importer fuzzer (`scripts/fuzz_import.sh`) found crashing,
//! kept in `fixtures/fuzz/`: each must import or fail with an error, and an
//! imported graph must export and analyse without panicking, as the fuzz
//! target demands. Add every new crash here.

use bytes::Bytes;
use graph_ir::onnx::{ImportOptions, export_bytes, import_bytes};

#[test]
fn every_kept_fuzz_crash_is_handled() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/fuzz");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures/fuzz")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 2, "{}", dir.display());
    for f in &files {
        let data = std::fs::read(f).unwrap();
        if let Ok(g) = import_bytes(Bytes::from(data), "fuzz", &ImportOptions::default()) {
            let _ = export_bytes(&g);
            let _ = graph_ir::analysis::analyze(&g);
        }
    }
}
