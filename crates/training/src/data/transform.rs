//! Turning dataset images into model inputs: channel adaptation, bilinear
//! resizing, random crop and flip augmentation, per-channel normalisation.

use graph_ir::rng::SplitMix64;
use serde::{Deserialize, Serialize};

use super::Dataset;
use crate::error::TrainError;

/// Training-time augmentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Augment {
    /// Random crop after padding every side by this many pixels (0: none).
    pub crop_padding: usize,
    /// Random horizontal flip with probability 1/2.
    pub flip: bool,
}

/// How images become `[C, H, W]` float inputs of the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transform {
    /// `[channels, height, width]` the dataset stores.
    pub source: [usize; 3],
    /// `[channels, height, width]` the model takes.
    pub target: [usize; 3],
    /// Per target channel, subtracted from pixel values in `[0, 1]`.
    pub mean: Vec<f32>,
    /// Per target channel, divides after the mean is subtracted.
    pub std: Vec<f32>,
    pub augment: Augment,
}

impl Transform {
    /// A transform to `target` whose mean and standard deviation are measured
    /// on the `train` images. Grey images are repeated into three channels and
    /// colour images averaged into one when the model asks for it.
    pub fn fit(
        set: &dyn Dataset,
        train: &[usize],
        target: [usize; 3],
        augment: Augment,
    ) -> Result<Transform, TrainError> {
        let source = set.image_shape();
        let (cs, ct) = (source[0], target[0]);
        if !(cs == ct || cs == 1 || (cs == 3 && ct == 1)) {
            return Err(TrainError::Option {
                key: "dataset",
                reason: format!(
                    "{} has {cs}-channel images but the model takes {ct} channels",
                    set.describe()
                ),
            });
        }
        let mut t = Transform {
            source,
            target,
            mean: vec![0.0; ct],
            std: vec![1.0; ct],
            augment: Augment::default(),
        };
        let (mut sum, mut sq, mut count) = (vec![0f64; ct], vec![0f64; ct], 0f64);
        for &i in train {
            let img = t.adapt(set.image(i));
            let plane = source[1] * source[2];
            for c in 0..ct {
                for &v in &img[c * plane..(c + 1) * plane] {
                    sum[c] += v as f64;
                    sq[c] += (v as f64) * (v as f64);
                }
            }
            count += plane as f64;
        }
        for c in 0..ct {
            let m = sum[c] / count.max(1.0);
            t.mean[c] = m as f32;
            t.std[c] = ((sq[c] / count.max(1.0) - m * m).max(1e-12).sqrt()) as f32;
        }
        t.augment = augment;
        Ok(t)
    }

    /// What the transform changes in every image to fit the model, one
    /// line (`1-channel images repeated into 3 channels, 8x8 resized to
    /// 32x32`); `None` when the images fit as they are.
    pub fn conversion(&self) -> Option<String> {
        let ([cs, hs, ws], [ct, ht, wt]) = (self.source, self.target);
        let mut parts = Vec::new();
        if cs != ct {
            parts.push(if cs == 1 {
                format!("1-channel images repeated into {ct} channels")
            } else {
                format!("{cs}-channel images averaged into 1 channel")
            });
        }
        if [hs, ws] != [ht, wt] {
            parts.push(format!("{hs}x{ws} images resized to {ht}x{wt}"));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// Pixel values in `[0, 1]` with the model's channel count, at the source size.
    fn adapt(&self, img: &[u8]) -> Vec<f32> {
        let (cs, ct) = (self.source[0], self.target[0]);
        let plane = self.source[1] * self.source[2];
        let px = |v: u8| v as f32 / 255.0;
        if cs == ct {
            img.iter().map(|&v| px(v)).collect()
        } else if cs == 1 {
            (0..ct).flat_map(|_| img.iter().map(|&v| px(v))).collect()
        } else {
            (0..plane)
                .map(|k| (0..cs).map(|c| px(img[c * plane + k])).sum::<f32>() / cs as f32)
                .collect()
        }
    }

    /// The inputs for `indices`, `[n, C, H, W]` row-major; with `rng`, augmented.
    pub fn batch(&self, set: &dyn Dataset, indices: &[usize], mut rng: Option<&mut SplitMix64>) -> Vec<f32> {
        let [ct, h, w] = self.target;
        let mut out = Vec::with_capacity(indices.len() * ct * h * w);
        let (ys, xs) = (axis_taps(self.source[1], h), axis_taps(self.source[2], w));
        let same_size = [self.source[1], self.source[2]] == [h, w];
        for &i in indices {
            let img = self.adapt(set.image(i));
            let (dy, dx, flip) = match rng.as_deref_mut() {
                Some(r) if self.augment != Augment::default() => {
                    let p = self.augment.crop_padding;
                    let (dy, dx) = (
                        r.below(2 * p + 1) as isize - p as isize,
                        r.below(2 * p + 1) as isize - p as isize,
                    );
                    (dy, dx, self.augment.flip && r.below(2) == 1)
                }
                _ => (0, 0, false),
            };
            let sw = self.source[2];
            let plane = self.source[1] * sw;
            if same_size && (dy, dx, flip) == (0, 0, false) {
                for c in 0..ct {
                    let (m, s) = (self.mean[c], self.std[c]);
                    out.extend(img[c * plane..(c + 1) * plane].iter().map(|&v| (v - m) / s));
                }
                continue;
            }
            for c in 0..ct {
                let src = &img[c * plane..(c + 1) * plane];
                for y in 0..h {
                    for x in 0..w {
                        let (yy, xx) = (y as isize + dy, x as isize + dx);
                        let xx = if flip { w as isize - 1 - xx } else { xx };
                        let v = if yy < 0 || xx < 0 || yy >= h as isize || xx >= w as isize {
                            0.0
                        } else {
                            let ((y0, y1, fy), (x0, x1, fx)) = (ys[yy as usize], xs[xx as usize]);
                            let top = src[y0 * sw + x0] * (1.0 - fx) + src[y0 * sw + x1] * fx;
                            let bottom = src[y1 * sw + x0] * (1.0 - fx) + src[y1 * sw + x1] * fx;
                            top * (1.0 - fy) + bottom * fy
                        };
                        out.push((v - self.mean[c]) / self.std[c]);
                    }
                }
            }
        }
        out
    }
}

/// Bilinear taps (half-pixel centres) from `src` samples to `dst` samples.
fn axis_taps(src: usize, dst: usize) -> Vec<(usize, usize, f32)> {
    (0..dst)
        .map(|i| {
            let pos = ((i as f32 + 0.5) * src as f32 / dst as f32 - 0.5).clamp(0.0, (src - 1) as f32);
            let lo = pos.floor() as usize;
            (lo, (lo + 1).min(src - 1), pos - lo as f32)
        })
        .collect()
}
