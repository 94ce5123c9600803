//! Content variation of an app's input (Heimdall Eq. 4): the sum of
//! absolute luminance differences between the frames of two consecutive
//! requests, here divided by the pixel count and the luminance range so
//! that it is a share in [0, 1] whatever the frame size.

use graph_ir::rng::SplitMix64;
use scheduler_rt::npy;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where an app's input frames come from (content variation, Heimdall Eq. 4).
#[derive(Clone, Debug, PartialEq)]
pub enum Frames {
    None,
    /// Synthetic frames: this share of pixels changes between requests.
    Synthetic {
        variation: f64,
    },
    /// `.npy` frames in name order, cycled.
    Dir(PathBuf),
}

#[derive(Debug, Error)]
pub enum ContentError {
    #[error("{dir}: {reason}")]
    Dir { dir: String, reason: String },
    #[error(transparent)]
    Npy(#[from] npy::NpyError),
}

/// Side of the synthetic frames.
const SYNTHETIC_SIDE: usize = 32;

/// Successive luminance frames of one app and the variation between them.
pub enum FrameSource {
    None,
    Synthetic {
        variation: f64,
        frame: Vec<f64>,
        rng: SplitMix64,
    },
    Frames {
        frames: Vec<Vec<f64>>,
        next: usize,
        last: Option<usize>,
    },
}

/// Mean absolute difference of two luminance frames of values in [0, 1]
/// (0 when their sizes differ or they are empty).
pub fn variation(a: &[f64], b: &[f64]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>() / a.len() as f64
}

/// Luminance in [0, 1] of a frame: `[.., 3, H, W]` (RGB, BT.601 weights) or
/// any other shape taken as luminance already; values above 1 are read as
/// 0-255.
fn luminance(a: &npy::Array) -> Vec<f64> {
    let scale = if a.data.iter().any(|v| *v > 1.0) { 255.0 } else { 1.0 };
    let n = a.shape.len();
    if n >= 3 && a.shape[n - 3] == 3 {
        let plane = a.shape[n - 2] * a.shape[n - 1];
        let (r, g, b) = (
            &a.data[..plane],
            &a.data[plane..2 * plane],
            &a.data[2 * plane..3 * plane],
        );
        (0..plane)
            .map(|i| (0.299 * r[i] as f64 + 0.587 * g[i] as f64 + 0.114 * b[i] as f64) / scale)
            .collect()
    } else {
        a.data.iter().map(|v| *v as f64 / scale).collect()
    }
}

impl FrameSource {
    /// The source an app declares; `seed` seeds synthetic frames.
    pub fn open(frames: &Frames, seed: u64) -> Result<FrameSource, ContentError> {
        Ok(match frames {
            Frames::None => FrameSource::None,
            Frames::Synthetic { variation } => {
                let mut rng = SplitMix64::new(seed);
                let frame = (0..SYNTHETIC_SIDE * SYNTHETIC_SIDE).map(|_| rng.next_f64()).collect();
                FrameSource::Synthetic {
                    variation: *variation,
                    frame,
                    rng,
                }
            }
            Frames::Dir(dir) => FrameSource::Frames {
                frames: read_dir(dir)?,
                next: 0,
                last: None,
            },
        })
    }

    /// The next request's content variation against the previous request's frame.
    pub fn next_variation(&mut self) -> f64 {
        match self {
            FrameSource::None => 0.0,
            FrameSource::Synthetic { variation, frame, rng } => {
                let before = frame.clone();
                for p in frame.iter_mut() {
                    if rng.next_f64() < *variation {
                        *p = rng.next_f64();
                    }
                }
                self::variation(&before, frame)
            }
            FrameSource::Frames { frames, next, last } => {
                let i = *next;
                *next = (i + 1) % frames.len();
                let v = last.map_or(0.0, |l| self::variation(&frames[l], &frames[i]));
                *last = Some(i);
                v
            }
        }
    }
}

fn read_dir(dir: &Path) -> Result<Vec<Vec<f64>>, ContentError> {
    let bad = |reason: String| ContentError::Dir {
        dir: dir.display().to_string(),
        reason,
    };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| bad(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "npy"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(bad("no .npy frames in it".into()));
    }
    paths.iter().map(|p| Ok(luminance(&npy::read(p)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_frames_vary_by_about_their_share() {
        let mut calm = FrameSource::open(&Frames::Synthetic { variation: 0.02 }, 1).unwrap();
        let mut busy = FrameSource::open(&Frames::Synthetic { variation: 0.5 }, 1).unwrap();
        let c: f64 = (0..50).map(|_| calm.next_variation()).sum::<f64>() / 50.0;
        let b: f64 = (0..50).map(|_| busy.next_variation()).sum::<f64>() / 50.0;
        // A changed pixel moves by 1/3 on average (two uniform draws).
        assert!((c - 0.02 / 3.0).abs() < 0.004, "{c}");
        assert!((b - 0.5 / 3.0).abs() < 0.02, "{b}");
    }

    #[test]
    fn npy_frames_give_their_luminance_difference() {
        let dir = std::env::temp_dir().join(format!("stretch-frames-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let black = npy::Array {
            shape: vec![3, 2, 2],
            data: vec![0.0; 12],
        };
        let white = npy::Array {
            shape: vec![3, 2, 2],
            data: vec![255.0; 12],
        };
        npy::write(&dir.join("a.npy"), &black).unwrap();
        npy::write(&dir.join("b.npy"), &white).unwrap();
        let mut s = FrameSource::open(&Frames::Dir(dir.clone()), 0).unwrap();
        assert_eq!(s.next_variation(), 0.0);
        assert!((s.next_variation() - 1.0).abs() < 1e-9);
        std::fs::remove_dir_all(&dir).unwrap();
        let e = FrameSource::open(&Frames::Dir(dir.clone()), 0).err().unwrap();
        assert!(e.to_string().contains("stretch-frames"), "{e}");
    }
}
