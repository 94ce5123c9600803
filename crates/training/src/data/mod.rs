//! Image classification datasets: a [`Dataset`] trait, loaders for the
//! bundled digits, CIFAR-10 binary batches, MNIST IDX files and image-folder
//! trees, a seeded train/validation split and batch preparation.

mod cifar;
mod digits;
mod folder;
mod mnist;
mod transform;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use graph_ir::rng::SplitMix64;

pub use transform::{Augment, Transform};

use crate::error::TrainError;

/// A labelled set of equally sized 8-bit images.
pub trait Dataset: Send + Sync {
    /// A short description for messages (kind and path).
    fn describe(&self) -> String;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Number of classes; labels are `0..classes`.
    fn classes(&self) -> usize;
    /// `[channels, height, width]` of every image.
    fn image_shape(&self) -> [usize; 3];
    /// Pixels of image `i`, `[C, H, W]` row-major, 0..=255.
    fn image(&self, i: usize) -> &[u8];
    fn label(&self, i: usize) -> usize;
    /// Where the dataset's own test split begins: images from this index on
    /// are its test set (MNIST's and Fashion-MNIST's t10k files, CIFAR's
    /// test batch). `None` when the files hold no test split.
    fn test_start(&self) -> Option<usize> {
        None
    }
}

/// A dataset held in memory.
#[derive(Clone, Debug)]
pub struct ImageSet {
    pub description: String,
    pub shape: [usize; 3],
    pub classes: usize,
    pub pixels: Vec<u8>,
    pub labels: Vec<u16>,
    /// See [`Dataset::test_start`].
    pub test_start: Option<usize>,
    /// What the loader changed in the files' images to give them one
    /// shape, one line each (`3 greyscale images repeated into RGB`).
    pub converted: Vec<String>,
}

impl ImageSet {
    fn volume(&self) -> usize {
        self.shape.iter().product()
    }
}

impl Dataset for ImageSet {
    fn describe(&self) -> String {
        self.description.clone()
    }
    fn test_start(&self) -> Option<usize> {
        self.test_start
    }
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn classes(&self) -> usize {
        self.classes
    }
    fn image_shape(&self) -> [usize; 3] {
        self.shape
    }
    fn image(&self, i: usize) -> &[u8] {
        let v = self.volume();
        &self.pixels[i * v..(i + 1) * v]
    }
    fn label(&self, i: usize) -> usize {
        self.labels[i] as usize
    }
}

/// Which dataset to load: `digits[:FILE]`, `cifar10:PATH`, `mnist:DIR`, `folder:DIR`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatasetSpec {
    /// scikit-learn's digits (`digits.csv.gz`); the bundled copy when no file is given.
    Digits(Option<PathBuf>),
    /// CIFAR-10 binary version: a directory with `data_batch_*.bin` /
    /// `test_batch.bin`, or one `.bin` file.
    Cifar10(PathBuf),
    /// MNIST IDX files (`*-images-idx3-ubyte` with matching `*-labels-idx1-ubyte`, optionally `.gz`).
    Mnist(PathBuf),
    /// One sub-directory per class holding PNG or JPEG images.
    Folder(PathBuf),
}

impl FromStr for DatasetSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<DatasetSpec, String> {
        let (kind, path) = match s.split_once(':') {
            Some((k, p)) => (k, Some(PathBuf::from(p))),
            None => (s, None),
        };
        let need = |p: Option<PathBuf>| p.ok_or_else(|| format!("dataset '{kind}' needs a path: {kind}:PATH"));
        Ok(match kind {
            "digits" => DatasetSpec::Digits(path),
            "cifar10" | "cifar" => DatasetSpec::Cifar10(need(path)?),
            "mnist" => DatasetSpec::Mnist(need(path)?),
            "folder" | "image-folder" => DatasetSpec::Folder(need(path)?),
            other => {
                return Err(format!(
                    "unknown dataset kind '{other}' (expected digits[:FILE], cifar10:PATH, mnist:DIR or folder:DIR)"
                ));
            }
        })
    }
}

impl fmt::Display for DatasetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetSpec::Digits(None) => write!(f, "digits"),
            DatasetSpec::Digits(Some(p)) => write!(f, "digits:{}", p.display()),
            DatasetSpec::Cifar10(p) => write!(f, "cifar10:{}", p.display()),
            DatasetSpec::Mnist(p) => write!(f, "mnist:{}", p.display()),
            DatasetSpec::Folder(p) => write!(f, "folder:{}", p.display()),
        }
    }
}

/// Where the bundled digits file lives: `$STRETCH_DATA/datasets/digits/digits.csv.gz`,
/// else `data/datasets/digits/digits.csv.gz` in the working directory or
/// the nearest of its parents that has it (a checkout's root or any folder
/// in it), else the repository this binary was built from (a build cache
/// shared between checkouts may hold one built elsewhere).
pub fn bundled_digits() -> PathBuf {
    const FILE: &str = "datasets/digits/digits.csv.gz";
    if let Some(base) = std::env::var_os("STRETCH_DATA") {
        return PathBuf::from(base).join(FILE);
    }
    let here = std::env::current_dir().ok();
    here.iter()
        .flat_map(|d| d.ancestors())
        .map(|d| d.join("data").join(FILE))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data")).join(FILE))
}

/// Loads a dataset. `folder` datasets are resized to `size` (`[height, width]`)
/// as they are decoded, since their files may differ in size.
pub fn load(spec: &DatasetSpec, size: [usize; 2]) -> Result<ImageSet, TrainError> {
    let check = |p: &PathBuf| {
        if p.exists() {
            Ok(())
        } else {
            Err(TrainError::dataset(p, "does not exist"))
        }
    };
    match spec {
        DatasetSpec::Digits(p) => {
            let p = p.clone().unwrap_or_else(bundled_digits);
            check(&p)?;
            digits::load(&p)
        }
        DatasetSpec::Cifar10(p) => {
            check(p)?;
            cifar::load(p)
        }
        DatasetSpec::Mnist(p) => {
            check(p)?;
            mnist::load(p)
        }
        DatasetSpec::Folder(p) => {
            check(p)?;
            folder::load(p, size)
        }
    }
}

/// The training and validation parts of `data`: with a test split of its
/// own, training draws from the images before it (the first `limit` of
/// them when given) and validation is the whole test split; without one,
/// the first `limit` images (all when `None`) are split by
/// [`split`]. `limit` must be at least 2.
pub fn split_of(data: &dyn Dataset, val_fraction: f64, seed: u64, limit: Option<usize>) -> Split {
    let len = data.len();
    match data.test_start().filter(|&t| t > 0 && t < len) {
        Some(t) => {
            let mut train: Vec<usize> = (0..limit.map_or(t, |n| n.min(t))).collect();
            SplitMix64::new(seed ^ SPLIT_SALT).shuffle(&mut train);
            Split {
                train,
                val: (t..len).collect(),
            }
        }
        None => split(limit.map_or(len, |n| n.min(len)), val_fraction, seed),
    }
}

/// Image indices of the training and validation parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub train: Vec<usize>,
    pub val: Vec<usize>,
}

/// Shuffles `0..len` with `seed` and keeps `val_fraction` of it (at least one
/// image) for validation. The same seed always gives the same split.
pub fn split(len: usize, val_fraction: f64, seed: u64) -> Split {
    let mut idx: Vec<usize> = (0..len).collect();
    SplitMix64::new(seed ^ SPLIT_SALT).shuffle(&mut idx);
    let n_val = ((len as f64 * val_fraction).round() as usize).clamp(1.min(len), len);
    let val = idx.split_off(len - n_val);
    Split { train: idx, val }
}

/// Keeps the split's stream apart from the shuffling and augmentation streams of the same seed.
const SPLIT_SALT: u64 = 0x5370_6c69_7453_6565;
