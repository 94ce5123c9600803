//! CIFAR-10 binary version: records of one label byte and 3x32x32 pixels.

use std::path::{Path, PathBuf};

use super::ImageSet;
use crate::error::TrainError;

const RECORD: usize = 1 + 3 * 32 * 32;

/// Reads one `.bin` batch file, or every `*.bin` batch in a directory
/// (`data_batch_1.bin` ... `test_batch.bin`, in name order); images from
/// `test_batch.bin` on are the set's test split.
pub fn load(path: &Path) -> Result<ImageSet, TrainError> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| TrainError::io(path, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "bin"))
            .collect();
        v.sort();
        if v.is_empty() {
            return Err(TrainError::dataset(
                path,
                "holds no CIFAR-10 batch files (expected data_batch_1.bin ... test_batch.bin from cifar-10-binary.tar.gz)",
            ));
        }
        v
    } else {
        vec![path.to_path_buf()]
    };
    let mut pixels = Vec::new();
    let mut labels = Vec::new();
    let mut test_start = None;
    for f in &files {
        if test_start.is_none()
            && !labels.is_empty()
            && f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("test_batch"))
        {
            test_start = Some(labels.len());
        }
        let bytes = std::fs::read(f).map_err(|e| TrainError::io(f, e))?;
        if bytes.is_empty() || bytes.len() % RECORD != 0 {
            return Err(TrainError::dataset(
                f,
                format!(
                    "{} bytes is not a whole number of CIFAR-10 records ({RECORD} bytes: a label byte and 3x32x32 pixels)",
                    bytes.len()
                ),
            ));
        }
        for (i, rec) in bytes.chunks_exact(RECORD).enumerate() {
            if rec[0] > 9 {
                return Err(TrainError::dataset(
                    f,
                    format!("record {i}: label {} (CIFAR-10 labels are 0..9)", rec[0]),
                ));
            }
            labels.push(rec[0] as u16);
            pixels.extend_from_slice(&rec[1..]);
        }
    }
    Ok(ImageSet {
        description: format!("cifar10 ({})", path.display()),
        shape: [3, 32, 32],
        classes: 10,
        pixels,
        labels,
        test_start,
        converted: Vec::new(),
    })
}
