//! Deployment bundles (schema `stretch.bundle/2`): a branched model cut
//! into one ONNX file per processor subgraph as the runtime cuts it, a
//! manifest (`bundle.json`) with the device's processors, each subgraph's
//! file, processor and tensors, the order and meeting points, reference
//! inputs and outputs and the SHA-256 of every file, and onnxruntime's
//! required-operators list. [`write`] writes one; [`Bundle::open`] reads
//! it back for a runner, every file it names confined to its directory
//! ([`BundleDir`]).

mod dir;
mod error;
#[cfg(feature = "onnx")]
pub mod export;
mod hash;
#[cfg(feature = "onnx")]
mod litert_files;
mod load;
mod manifest;
mod options;
pub mod ort_format;
pub mod rewrite;
mod staging;

pub use dir::{BundleDir, MAX_FILE_BYTES, MAX_MANIFEST_BYTES};
pub use error::BundleError;
#[cfg(feature = "onnx")]
pub use export::{FP16_RTOL, export, save, tensor_name, write};
pub use hash::sha256_hex;
pub use load::{Bundle, Loaded};
pub use manifest::{
    FileRef, LAYOUTS, LiteQuant, LiteRtDelegate, LiteTensor, MANIFEST, Manifest, Normalisation, Processor, Reference,
    SCHEMA, Subgraph, TensorSpec, TfliteModel,
};
pub use options::{Options, default_processor, normalisation};
pub use staging::Staging;
