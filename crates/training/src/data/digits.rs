//! scikit-learn's digits: `digits.csv.gz`, lines of 64 pixels (0..16) and a label.

use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;

use super::ImageSet;
use crate::error::TrainError;

/// Reads a digits CSV (gzip-compressed when the name ends in `.gz`).
pub fn load(path: &Path) -> Result<ImageSet, TrainError> {
    let bytes = std::fs::read(path).map_err(|e| TrainError::io(path, e))?;
    let mut text = String::new();
    let gz = path.extension().is_some_and(|e| e == "gz");
    let read = if gz {
        GzDecoder::new(&bytes[..]).read_to_string(&mut text)
    } else {
        (&bytes[..]).read_to_string(&mut text)
    };
    read.map_err(|e| {
        TrainError::dataset(
            path,
            format!("not a {}text file: {e}", if gz { "gzip-compressed " } else { "" }),
        )
    })?;
    let mut pixels = Vec::new();
    let mut labels = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: String| {
            TrainError::dataset(
                path,
                format!(
                    "line {}: {why}; expected 64 pixel values 0..16 and a label 0..9, comma-separated",
                    i + 1
                ),
            )
        };
        let values: Vec<&str> = line.split(',').collect();
        if values.len() != 65 {
            return Err(bad(format!("{} values", values.len())));
        }
        for (k, v) in values.iter().enumerate() {
            let x: u32 = v.trim().parse().map_err(|_| bad(format!("value {} is '{v}'", k + 1)))?;
            if k < 64 {
                if x > 16 {
                    return Err(bad(format!("pixel {} is {x}", k + 1)));
                }
                pixels.push(((x * 255 + 8) / 16) as u8);
            } else {
                if x > 9 {
                    return Err(bad(format!("label is {x}")));
                }
                labels.push(x as u16);
            }
        }
    }
    if labels.is_empty() {
        return Err(TrainError::dataset(path, "holds no images"));
    }
    Ok(ImageSet {
        description: format!("digits ({})", path.display()),
        shape: [1, 8, 8],
        classes: 10,
        pixels,
        labels,
        test_start: None,
        converted: Vec::new(),
    })
}
