//! A bundle directory as a reader sees it: a downloaded file that names
//! other files. Every file it names is a plain file inside the directory
//! after resolving links, of exactly the size the manifest states (at most
//! [`MAX_FILE_BYTES`]), read without following a link swapped in
//! meanwhile, without blocking on a FIFO and without reading past its
//! stated size; anything else is refused naming the manifest entry.

use crate::error::BundleError;
use crate::hash::sha256_hex;
use crate::manifest::{FileRef, MANIFEST};
use graph_ir::plain_file::{Links, MAX_MODEL_BYTES, PlainFileError, read_plain};
use std::path::{Component, Path, PathBuf};

/// The largest file a manifest may name: protobuf's limit on one ONNX
/// model, which also bounds every reference tensor a bundle holds.
pub const MAX_FILE_BYTES: u64 = MAX_MODEL_BYTES;

/// The largest manifest read.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// An opened bundle directory.
#[derive(Clone, Debug)]
pub struct BundleDir {
    /// The directory with every link resolved.
    root: PathBuf,
    /// The directory as the caller named it (for messages).
    given: PathBuf,
}

impl BundleDir {
    /// Opens `dir`, which must be a directory.
    pub fn open(dir: &Path) -> Result<BundleDir, BundleError> {
        let root = std::fs::canonicalize(dir).map_err(|e| BundleError::io("find bundle.json in", dir, e))?;
        if !root.is_dir() {
            return Err(BundleError::io(
                "find bundle.json in",
                dir,
                std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a bundle directory"),
            ));
        }
        Ok(BundleDir {
            root,
            given: dir.to_path_buf(),
        })
    }

    /// `file` inside the directory, as the caller named the directory.
    pub fn path(&self, file: &str) -> PathBuf {
        self.given.join(file)
    }

    /// The manifest's text (a plain file of at most [`MAX_MANIFEST_BYTES`]).
    pub fn read_manifest(&self) -> Result<String, BundleError> {
        let bytes = self.read_inside("manifest", MANIFEST, MAX_MANIFEST_BYTES)?;
        String::from_utf8(bytes).map_err(|e| BundleError::Manifest {
            path: self.path(MANIFEST),
            reason: format!("not UTF-8 text ({e})"),
        })
    }

    /// The bytes of the file manifest entry `entry` names, checked against
    /// the size and SHA-256 the entry states.
    pub fn read(&self, entry: &str, f: &FileRef) -> Result<Vec<u8>, BundleError> {
        let refuse = |reason: String| BundleError::Entry {
            entry: entry.to_string(),
            file: f.file.clone(),
            reason,
        };
        if f.bytes > MAX_FILE_BYTES {
            return Err(refuse(format!(
                "the manifest sizes at {} bytes, over the limit of {MAX_FILE_BYTES}",
                f.bytes
            )));
        }
        let bytes = self.read_inside(entry, &f.file, f.bytes)?;
        if bytes.len() as u64 != f.bytes {
            return Err(refuse(format!(
                "holds {} bytes where the manifest says {}",
                bytes.len(),
                f.bytes
            )));
        }
        let found = sha256_hex(&bytes);
        if found != f.sha256 {
            return Err(BundleError::Hash {
                path: self.path(&f.file),
                want: f.sha256.clone(),
                found,
            });
        }
        Ok(bytes)
    }

    fn read_inside(&self, entry: &str, file: &str, limit: u64) -> Result<Vec<u8>, BundleError> {
        let refuse = |reason: String| BundleError::Entry {
            entry: entry.to_string(),
            file: file.to_string(),
            reason,
        };
        let rel = Path::new(file);
        if file.is_empty() || file.contains('\0') {
            return Err(refuse("is not a file name".into()));
        }
        for c in rel.components() {
            match c {
                Component::Normal(_) => {}
                Component::CurDir => return Err(refuse("holds a `.` component".into())),
                Component::ParentDir => return Err(refuse("leaves the bundle through `..`".into())),
                Component::RootDir | Component::Prefix(_) => return Err(refuse("is an absolute path".into())),
            }
        }
        let joined = self.root.join(rel);
        let resolved = std::fs::canonicalize(&joined).map_err(|e| BundleError::io("read", self.path(file), e))?;
        if !resolved.starts_with(&self.root) {
            return Err(refuse("is a link that leads outside the bundle".into()));
        }
        read_plain(&resolved, limit, Links::Refuse).map_err(|e| match e {
            PlainFileError::Io { error, .. } => BundleError::io("read", self.path(file), error),
            PlainFileError::NotPlain { kind, .. } => refuse(format!("is a {kind}")),
            PlainFileError::TooLarge { size, limit, .. } => {
                refuse(format!("holds {size} bytes, more than the {limit} allowed"))
            }
        })
    }
}
