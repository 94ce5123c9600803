//! Reading a file that a user, a workload or a downloaded bundle names:
//! only a regular file, opened without blocking (a FIFO never hangs the
//! reader), never a device, and read with a size bound (`/dev/zero` or a
//! sparse file never fills memory).

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The largest model file read: protobuf's limit on one serialized
/// message, which every ONNX file is.
pub const MAX_MODEL_BYTES: u64 = 2 << 30;

/// Why a file was not read.
#[derive(Debug, Error)]
pub enum PlainFileError {
    /// The I/O error is in the message and is not returned by `source()`.
    #[error("cannot read {}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{} is a {kind}, not a plain file; only regular files are read", path.display())]
    NotPlain { path: PathBuf, kind: &'static str },
    #[error("{} holds {size} bytes, over the limit of {limit} bytes", path.display())]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
}

impl PlainFileError {
    /// The message without the path, for callers that name the file themselves.
    pub fn reason(&self) -> String {
        match self {
            PlainFileError::Io { error, .. } => format!("cannot read: {error}"),
            PlainFileError::NotPlain { kind, .. } => {
                format!("is a {kind}, not a plain file; only regular files are read")
            }
            PlainFileError::TooLarge { size, limit, .. } => {
                format!("holds {size} bytes, over the limit of {limit} bytes")
            }
        }
    }
}

/// Whether the last component of a path may be a symbolic link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    /// Follow it (a path the user typed).
    Follow,
    /// Refuse it (a path already resolved, read where a link swapped in
    /// meanwhile must not be followed).
    Refuse,
}

/// What kind of file `m` describes, in words.
pub fn kind_of(m: &Metadata) -> &'static str {
    let t = m.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "FIFO";
        }
        if t.is_char_device() {
            return "character device";
        }
        if t.is_block_device() {
            return "block device";
        }
        if t.is_socket() {
            return "socket";
        }
    }
    if t.is_symlink() {
        "symbolic link"
    } else if t.is_dir() {
        "directory"
    } else if t.is_file() {
        "regular file"
    } else {
        "special file"
    }
}

fn open(path: &Path, links: Links) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let nofollow = if links == Links::Refuse { libc::O_NOFOLLOW } else { 0 };
        o.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | nofollow);
    }
    o.open(path)
}

/// Reads the regular file at `path`, at most `limit` bytes: anything else
/// (a directory, FIFO, device, socket, or with [`Links::Refuse`] a link) is
/// refused before a byte is read, and a file longer than `limit` is
/// refused without reading it.
pub fn read_plain(path: &Path, limit: u64, links: Links) -> Result<Vec<u8>, PlainFileError> {
    let io = |error| PlainFileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let before = match links {
        Links::Follow => std::fs::metadata(path),
        Links::Refuse => std::fs::symlink_metadata(path),
    }
    .map_err(io)?;
    if !before.is_file() {
        return Err(PlainFileError::NotPlain {
            path: path.to_path_buf(),
            kind: kind_of(&before),
        });
    }
    let file = match open(path, links) {
        Ok(f) => f,
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(PlainFileError::NotPlain {
                path: path.to_path_buf(),
                kind: "symbolic link",
            });
        }
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(PlainFileError::NotPlain {
            path: path.to_path_buf(),
            kind: kind_of(&meta),
        });
    }
    let too_large = |size| PlainFileError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The largest configuration file (TOML, JSON) read.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// Fails unless `path` (links followed) is a regular file, naming what it
/// is otherwise; reads nothing.
pub fn check_plain(path: &Path) -> Result<(), PlainFileError> {
    let m = std::fs::metadata(path).map_err(|error| PlainFileError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    if m.is_file() {
        Ok(())
    } else {
        Err(PlainFileError::NotPlain {
            path: path.to_path_buf(),
            kind: kind_of(&m),
        })
    }
}

/// [`read_plain`] as UTF-8 text.
pub fn read_plain_text(path: &Path, limit: u64) -> Result<String, PlainFileError> {
    let bytes = read_plain(path, limit, Links::Follow)?;
    String::from_utf8(bytes).map_err(|e| PlainFileError::Io {
        path: path.to_path_buf(),
        error: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("plain-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_regular_file_within_the_limit_is_read() {
        let d = dir("ok");
        std::fs::write(d.join("f"), b"12345").unwrap();
        assert_eq!(read_plain(&d.join("f"), 5, Links::Refuse).unwrap(), b"12345");
        let err = read_plain(&d.join("f"), 4, Links::Follow).unwrap_err().to_string();
        assert!(err.contains("holds 5 bytes, over the limit of 4"), "{err}");
    }

    #[test]
    fn a_device_a_directory_and_a_fifo_are_refused_without_blocking() {
        let err = read_plain(Path::new("/dev/zero"), MAX_MODEL_BYTES, Links::Follow)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/dev/zero is a character device"), "{err}");
        let d = dir("fifo");
        let err = read_plain(&d, 10, Links::Follow).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        let fifo = d.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_plain(&fifo, 10, Links::Follow).unwrap_err().to_string();
        assert!(err.contains("is a FIFO"), "{err}");
    }

    #[test]
    fn a_link_is_followed_only_when_asked() {
        let d = dir("link");
        std::fs::write(d.join("f"), b"x").unwrap();
        std::os::unix::fs::symlink(d.join("f"), d.join("l")).unwrap();
        assert_eq!(read_plain(&d.join("l"), 1, Links::Follow).unwrap(), b"x");
        let err = read_plain(&d.join("l"), 1, Links::Refuse).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
    }
}
