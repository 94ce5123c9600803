//! Writing a bundle whole or not at all: files go into a fresh directory
//! beside the destination, moved into place once the bundle is complete;
//! a bundle that fails leaves nothing behind, and a directory holding
//! files is replaced only when asked and only if it is a bundle.

use crate::error::BundleError;
use crate::manifest::MANIFEST;
use std::path::{Path, PathBuf};

/// A bundle being written; dropped uncommitted, its files are removed.
pub struct Staging {
    dest: PathBuf,
    tmp: PathBuf,
    committed: bool,
}

fn sibling(dest: &Path, tag: &str) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dest.with_file_name(format!(".{name}.{tag}-{}", std::process::id()))
}

impl Staging {
    /// Starts a bundle for `dest`. Fails when `dest` is a file, or a
    /// directory holding files unless `replace` is set and it holds a
    /// bundle (`bundle.json`): other directories are never replaced.
    pub fn new(dest: &Path, replace: bool) -> Result<Staging, BundleError> {
        let refuse = |reason: String| BundleError::Export {
            reason: format!("{}: {reason}", dest.display()),
        };
        if let Ok(m) = std::fs::symlink_metadata(dest) {
            if !m.is_dir() {
                return Err(refuse("exists and is not a directory".into()));
            }
            let entries = std::fs::read_dir(dest).map_err(|e| BundleError::io("read", dest, e))?;
            let count = entries.count();
            if count > 0 && !dest.join(MANIFEST).is_file() {
                return Err(refuse(format!(
                    "holds {count} entries and no {MANIFEST}: not a bundle, so it is not replaced; choose an empty or new directory"
                )));
            }
            if count > 0 && !replace {
                return Err(refuse(format!(
                    "holds a bundle already: pass --force to replace it (its {count} entries are removed)"
                )));
            }
        }
        let tmp = sibling(dest, "partial");
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| BundleError::io("remove", &tmp, e))?;
        }
        std::fs::create_dir_all(&tmp).map_err(|e| BundleError::io("create", &tmp, e))?;
        Ok(Staging {
            dest: dest.to_path_buf(),
            tmp,
            committed: false,
        })
    }

    /// Where the bundle's files are written until [`Staging::commit`].
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Moves the finished bundle to its destination, replacing what was there.
    pub fn commit(mut self) -> Result<(), BundleError> {
        let old = sibling(&self.dest, "old");
        let had = self.dest.exists();
        if had {
            std::fs::rename(&self.dest, &old).map_err(|e| BundleError::io("move aside", &self.dest, e))?;
        }
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| BundleError::io("move into place", &self.dest, e))?;
        self.committed = true;
        if had {
            std::fs::remove_dir_all(&old).map_err(|e| BundleError::io("remove", &old, e))?;
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}
