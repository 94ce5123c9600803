//! SHA-256 of bundle files.

use crate::error::BundleError;
use sha2::{Digest, Sha256};
use std::path::Path;

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The lowercase hex SHA-256 of the file at `path`.
pub fn sha256_file(path: &Path) -> Result<String, BundleError> {
    let bytes = std::fs::read(path).map_err(|e| BundleError::io("read", path, e))?;
    Ok(sha256_hex(&bytes))
}
