//! Deployment bundles (schema `stretch.bundle/1`): a branched model cut
//! into one ONNX file per processor subgraph as the runtime cuts it, a
//! manifest (`bundle.json`) with the device's processors, each subgraph's
//! file, processor and tensors, the order and meeting points, reference
//! inputs and outputs and the SHA-256 of every file, and onnxruntime's
//! required-operators list. [`export`] writes one; [`Manifest::load`],
//! [`verify`] and [`stitch`] read it back for a runner.

mod error;
pub mod export;
mod hash;
mod load;
mod manifest;
pub mod rewrite;

pub use error::BundleError;
pub use export::{Options, export, save, tensor_name};
pub use hash::{sha256_file, sha256_hex};
pub use load::{Loaded, stitch, verify};
pub use manifest::{FileRef, MANIFEST, Manifest, Normalisation, Processor, Reference, SCHEMA, Subgraph, TensorSpec};
