//! The rendering task's work on this machine, standing in for a GPU's
//! render pass: a shading loop (a few multiply-adds per pixel) over 1080p
//! worth of pixels, tile by tile, on a tile that stays in the core's cache.
//! It is compute-bound on purpose: a memory-bound blend over a whole 1080p
//! framebuffer shares the memory bus with the other cores, so its time
//! depends on what they do. A kernel shades a fixed number of tiles, so
//! its time is set by calibration on the worker that runs it.

use engine::{Compiled, EngineError, Value};
use std::sync::Mutex;
use tract_onnx::prelude::TVec;

/// Pixels of one tile (16 KiB of f32: stays in L1/L2).
const TILE: usize = 4096;
/// Tiles of one 1080p frame (1920 × 1080 pixels).
pub const ROWS: usize = 1920 * 1080 / TILE;

/// Shades `rows` tiles per run.
pub struct RenderKernel {
    rows: usize,
    tile: Mutex<Vec<f32>>,
}

impl RenderKernel {
    pub fn new(rows: usize) -> RenderKernel {
        RenderKernel {
            rows: rows.max(1),
            tile: Mutex::new((0..TILE).map(|i| (i % 251) as f32 / 251.0).collect()),
        }
    }
}

/// Clears the upper halves of the vector registers. The engines' AVX-512
/// kernels leave them dirty, and this kernel's SSE code then runs slower
/// on the same thread until they are cleared.
fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is available (checked above); vzeroupper only clears
        // the upper bits of vector registers, which no live value here uses.
        unsafe { std::arch::x86_64::_mm256_zeroupper() };
    }
}

impl Compiled for RenderKernel {
    fn run(&self, _inputs: TVec<Value>) -> Result<TVec<Value>, EngineError> {
        clear_upper_vector_state();
        let mut tile = self.tile.lock().map_err(|_| EngineError::Run {
            engine: "render",
            reason: "render state poisoned".to_string(),
        })?;
        for r in 0..self.rows {
            let light = 0.25 + (r % 7) as f32 * 0.01;
            for p in tile.iter_mut() {
                let lit = *p * 0.9 + light;
                *p = (lit * lit * 0.5 + 0.25 * lit).min(1.0);
            }
        }
        std::hint::black_box(&tile[..]);
        Ok(TVec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn more_rows_take_longer() {
        let small = RenderKernel::new(20);
        let big = RenderKernel::new(400);
        small.run(TVec::new()).unwrap();
        big.run(TVec::new()).unwrap();
        let time = |k: &RenderKernel| {
            let t = Instant::now();
            k.run(TVec::new()).unwrap();
            t.elapsed()
        };
        let (s, b) = (
            (0..5).map(|_| time(&small)).min().unwrap(),
            (0..5).map(|_| time(&big)).min().unwrap(),
        );
        assert!(b > s * 4, "{s:?} vs {b:?}");
    }
}
