//! Image-folder trees: `ROOT/CLASS/IMAGE.png|jpg`, classes in name order.

use std::path::Path;

use image::imageops::FilterType;

use super::ImageSet;
use crate::error::TrainError;

/// Decodes every PNG/JPEG under `root`'s class directories as RGB, resized to `size`.
pub fn load(root: &Path, size: [usize; 2]) -> Result<ImageSet, TrainError> {
    let mut classes: Vec<_> = std::fs::read_dir(root)
        .map_err(|e| TrainError::io(root, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    classes.sort();
    if classes.is_empty() {
        return Err(TrainError::dataset(
            root,
            "has no class sub-directories (expected ROOT/CLASS/IMAGE.png)",
        ));
    }
    let [h, w] = size;
    let mut set = ImageSet {
        description: format!("folder ({}, {} classes)", root.display(), classes.len()),
        shape: [3, h, w],
        classes: classes.len(),
        pixels: Vec::new(),
        labels: Vec::new(),
        test_start: None,
        converted: Vec::new(),
    };
    let (mut grey, mut alpha, mut resized) = (0usize, 0usize, 0usize);
    for (label, dir) in classes.iter().enumerate() {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| TrainError::io(dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension()
                    .is_some_and(|e| matches!(e.to_string_lossy().to_lowercase().as_str(), "png" | "jpg" | "jpeg"))
            })
            .collect();
        files.sort();
        for f in files {
            let img =
                image::open(&f).map_err(|e| TrainError::dataset(&f, format!("cannot decode as PNG/JPEG: {e}")))?;
            grey += usize::from(!img.color().has_color());
            alpha += usize::from(img.color().has_alpha());
            resized += usize::from([img.height() as usize, img.width() as usize] != [h, w]);
            let img = img.to_rgb8();
            let img = image::imageops::resize(&img, w as u32, h as u32, FilterType::Triangle);
            for c in 0..3 {
                set.pixels.extend(img.pixels().map(|p| p.0[c]));
            }
            set.labels.push(label as u16);
        }
    }
    let n = set.labels.len();
    for (count, what) in [
        (grey, "greyscale, repeated into RGB"),
        (alpha, "with an alpha channel, dropped"),
        (resized, &format!("of another size, resized to {h}x{w}") as &str),
    ] {
        if count > 0 {
            set.converted.push(format!("{count} of {n} images {what}"));
        }
    }
    if set.labels.is_empty() {
        return Err(TrainError::dataset(
            root,
            "has class directories but no .png/.jpg images",
        ));
    }
    Ok(set)
}
