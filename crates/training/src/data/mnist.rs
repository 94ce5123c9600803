//! MNIST-style IDX files: `*-images-idx3-ubyte` and `*-labels-idx1-ubyte`
//! pairs (optionally gzip-compressed) in one directory.

use std::io::Read;
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

use super::ImageSet;
use crate::error::TrainError;

/// Reads every images/labels pair in `dir`: training files first, then the
/// `t10k` test files, whose first image is the set's `test_start`.
pub fn load(dir: &Path) -> Result<ImageSet, TrainError> {
    let mut images: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| TrainError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("images-idx3-ubyte"))
        })
        .collect();
    images.sort_by_key(|p| {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        (name.starts_with("t10k"), name)
    });
    if images.is_empty() {
        return Err(TrainError::dataset(
            dir,
            "holds no MNIST image file (expected train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz])",
        ));
    }
    let mut set = ImageSet {
        description: format!("mnist ({})", dir.display()),
        shape: [1, 0, 0],
        classes: 0,
        pixels: Vec::new(),
        labels: Vec::new(),
        test_start: None,
        converted: Vec::new(),
    };
    for img in images {
        let name = img
            .file_name()
            .expect("file")
            .to_string_lossy()
            .replace("images-idx3", "labels-idx1");
        let lab = img.with_file_name(name);
        if !lab.exists() {
            return Err(TrainError::dataset(
                &lab,
                format!("missing: the labels for {}", img.display()),
            ));
        }
        let is_test = img.file_name().is_some_and(|n| n.to_string_lossy().starts_with("t10k"));
        if is_test && set.test_start.is_none() && !set.labels.is_empty() {
            set.test_start = Some(set.labels.len());
        }
        let (dims, pixels) = read_idx(&img, 3)?;
        let (ldims, labels) = read_idx(&lab, 1)?;
        if ldims[0] != dims[0] {
            return Err(TrainError::dataset(
                &lab,
                format!("{} labels for {} images in {}", ldims[0], dims[0], img.display()),
            ));
        }
        if set.labels.is_empty() {
            set.shape = [1, dims[1], dims[2]];
        } else if set.shape != [1, dims[1], dims[2]] {
            return Err(TrainError::dataset(
                &img,
                format!(
                    "images are {}x{}, earlier files {}x{}",
                    dims[1], dims[2], set.shape[1], set.shape[2]
                ),
            ));
        }
        set.pixels.extend_from_slice(&pixels);
        set.labels.extend(labels.iter().map(|&l| l as u16));
    }
    set.classes = set.labels.iter().map(|&l| l as usize + 1).max().unwrap_or(0);
    Ok(set)
}

/// Reads an unsigned-byte IDX file of `rank` dimensions: its dims and data.
fn read_idx(path: &Path, rank: usize) -> Result<(Vec<usize>, Vec<u8>), TrainError> {
    let raw = std::fs::read(path).map_err(|e| TrainError::io(path, e))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut v = Vec::new();
        GzDecoder::new(&raw[..])
            .read_to_end(&mut v)
            .map_err(|e| TrainError::dataset(path, format!("bad gzip data: {e}")))?;
        v
    } else {
        raw
    };
    let header = 4 + 4 * rank;
    let expected = format!("an IDX file of unsigned bytes with {rank} dimension(s) (magic 0x0000080{rank})");
    if bytes.len() < header || bytes[0..3] != [0, 0, 8] || bytes[3] as usize != rank {
        return Err(TrainError::dataset(path, format!("not {expected}")));
    }
    let dims: Vec<usize> = (0..rank)
        .map(|i| u32::from_be_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().expect("4 bytes")) as usize)
        .collect();
    let volume: usize = dims.iter().product();
    if bytes.len() - header != volume {
        return Err(TrainError::dataset(
            path,
            format!(
                "header says {dims:?} ({volume} bytes) but {} bytes follow",
                bytes.len() - header
            ),
        ));
    }
    Ok((dims, bytes[header..].to_vec()))
}
