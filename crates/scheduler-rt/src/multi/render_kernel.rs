//! The rendering task's work on this machine: a blend of a 1080p RGBA
//! frame into a framebuffer, row by row, standing in for a GPU's render
//! pass. A kernel blends a fixed number of rows (wrapping around the
//! frame), so its time is set by calibration on the worker that runs it.

use crate::engine::{Compiled, Value};
use std::sync::Mutex;
use tract_onnx::prelude::TVec;

/// Rows of one 1080p frame.
pub const ROWS: usize = 1080;
const WIDTH: usize = 1920;

/// Blends `rows` rows per run into its own framebuffer.
pub struct RenderKernel {
    rows: usize,
    state: Mutex<(Vec<u32>, Vec<u32>, usize)>,
}

impl RenderKernel {
    pub fn new(rows: usize) -> RenderKernel {
        let src: Vec<u32> = (0..ROWS * WIDTH)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761))
            .collect();
        RenderKernel {
            rows: rows.max(1),
            state: Mutex::new((src, vec![0; ROWS * WIDTH], 0)),
        }
    }
}

fn blend(a: u32, b: u32) -> u32 {
    let mut out = 0;
    for shift in [0, 8, 16, 24] {
        let x = (a >> shift) & 0xff;
        let y = (b >> shift) & 0xff;
        out |= ((x * 3 + y) / 4) << shift;
    }
    out
}

impl Compiled for RenderKernel {
    fn run(&self, _inputs: TVec<Value>) -> Result<TVec<Value>, String> {
        let mut guard = self.state.lock().map_err(|_| "render state poisoned".to_string())?;
        let (src, dst, row) = &mut *guard;
        for _ in 0..self.rows {
            let at = *row * WIDTH;
            for (d, s) in dst[at..at + WIDTH].iter_mut().zip(&src[at..at + WIDTH]) {
                *d = blend(*s, *d);
            }
            *row = (*row + 1) % ROWS;
        }
        std::hint::black_box(&dst[..]);
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
