//! The tensor pool (Puzzle §5): tensors an engine hands back across its
//! boundary are taken from buffers kept from earlier requests instead of
//! freshly allocated, and given back when the request that used them is
//! served. Every engine-boundary allocation and copy is counted, pool or
//! not, so that runs with and without it can be compared.
//!
//! Puzzle rounds buffers up to 2,048-byte chunks so that one buffer can
//! hold tensors of different sizes. A tensor of the runtime's engines
//! (tract's) cannot live in a buffer larger than its shape, so a kept
//! buffer serves tensors of its exact type and element count: the common
//! case, since every inference of a model produces the same intermediate
//! tensors. [`TensorPool::kept`] counts what is held in 2,048-byte chunks.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tract_core::prelude::{Datum, DatumType, IntoArcTensor, TValue, Tensor};

/// Puzzle's chunk size (bytes).
pub const CHUNK_BYTES: usize = 2048;

/// Buffers kept per size before more are freed instead.
const KEEP_PER_SIZE: usize = 64;

/// Engine-boundary counters since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PoolCounters {
    /// Tensor buffers allocated at an engine boundary.
    pub allocations: u64,
    /// Requests for a buffer the pool served from a kept one.
    pub reused: u64,
    /// Bytes copied across an engine boundary.
    pub bytes_copied: u64,
    /// Minor page faults of the whole process (`getrusage`), engines'
    /// own tensors included: memory an allocator handed back to the
    /// kernel and touched again faults once per 4 KiB page.
    pub page_faults: u64,
}

impl PoolCounters {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &PoolCounters) -> PoolCounters {
        PoolCounters {
            allocations: self.allocations - before.allocations,
            reused: self.reused - before.reused,
            bytes_copied: self.bytes_copied - before.bytes_copied,
            page_faults: self.page_faults.saturating_sub(before.page_faults),
        }
    }
}

impl std::ops::AddAssign for PoolCounters {
    fn add_assign(&mut self, o: PoolCounters) {
        self.allocations += o.allocations;
        self.reused += o.reused;
        self.bytes_copied += o.bytes_copied;
        self.page_faults += o.page_faults;
    }
}

/// Kept tensors by (type, element count), and the counters.
pub struct TensorPool {
    enabled: AtomicBool,
    kept: Mutex<HashMap<(DatumType, usize), Vec<Tensor>>>,
    allocations: AtomicU64,
    reused: AtomicU64,
    bytes_copied: AtomicU64,
}

static POOL: std::sync::LazyLock<TensorPool> = std::sync::LazyLock::new(TensorPool::new);

/// The process's pool.
pub fn pool() -> &'static TensorPool {
    &POOL
}

/// Minor page faults of this process so far (0 where unreadable).
fn process_minor_faults() -> u64 {
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) } != 0 {
        return 0;
    }
    r.ru_minflt.max(0) as u64
}

/// 2,048-byte chunks a buffer of `bytes` takes.
pub fn chunks(bytes: usize) -> usize {
    bytes.div_ceil(CHUNK_BYTES)
}

impl TensorPool {
    /// An empty pool, on, with zero counters.
    fn new() -> TensorPool {
        TensorPool {
            enabled: AtomicBool::new(true),
            kept: Mutex::new(HashMap::new()),
            allocations: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            bytes_copied: AtomicU64::new(0),
        }
    }

    /// Turns reuse on or off (off: every buffer is allocated and freed,
    /// still counted); turning it off frees what is kept.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
        if !on && let Ok(mut k) = self.kept.lock() {
            k.clear();
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn counters(&self) -> PoolCounters {
        PoolCounters {
            allocations: self.allocations.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            bytes_copied: self.bytes_copied.load(Ordering::Relaxed),
            page_faults: process_minor_faults(),
        }
    }

    /// Counts a buffer allocated at an engine boundary outside the pool.
    pub fn allocated(&self) {
        self.allocations.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `bytes` copied across an engine boundary.
    pub fn copied(&self, bytes: usize) {
        self.bytes_copied.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A tensor of `shape` holding `data` (copied in): a kept buffer of
    /// that type and size when there is one, else a new one.
    pub fn tensor<T: Datum + Copy>(&self, shape: &[usize], data: &[T]) -> Result<Tensor, String> {
        let len: usize = shape.iter().product();
        if len != data.len() {
            return Err(format!("{} values for shape {shape:?}", data.len()));
        }
        let kept = if self.enabled() {
            self.kept
                .lock()
                .ok()
                .and_then(|mut k| k.get_mut(&(T::datum_type(), len)).and_then(Vec::pop))
        } else {
            None
        };
        self.copied(std::mem::size_of_val(data));
        match kept {
            Some(mut t) => {
                self.reused.fetch_add(1, Ordering::Relaxed);
                t.set_shape(shape).map_err(|e| e.to_string())?;
                t.try_as_plain_ram_mut()
                    .map_err(|e| e.to_string())?
                    .as_slice_mut::<T>()
                    .map_err(|e| e.to_string())?
                    .copy_from_slice(data);
                Ok(t)
            }
            None => {
                self.allocations.fetch_add(1, Ordering::Relaxed);
                Tensor::from_shape(shape, data).map_err(|e| e.to_string())
            }
        }
    }

    /// Takes `t` back for a later request (dropped when the pool is off or
    /// already keeps enough of its size).
    pub fn give(&self, t: Tensor) {
        if !self.enabled() || !matches!(t.datum_type(), DatumType::F32 | DatumType::U8) {
            return;
        }
        if let Ok(mut k) = self.kept.lock() {
            let list = k.entry((t.datum_type(), t.len())).or_default();
            if list.len() < KEEP_PER_SIZE {
                list.push(t);
            }
        }
    }

    /// Takes a finished request's value back when nothing else holds it
    /// (a value still shared, such as a model input or a returned output,
    /// is left alone).
    pub fn give_value(&self, v: TValue) {
        if let Ok(t) = std::sync::Arc::try_unwrap(v.into_arc_tensor()) {
            self.give(t);
        }
    }

    /// Kept buffers and the 2,048-byte chunks they take.
    pub fn kept(&self) -> (usize, usize) {
        let Ok(k) = self.kept.lock() else { return (0, 0) };
        k.iter().fold((0, 0), |(n, c), ((dt, len), v)| {
            (n + v.len(), c + v.len() * chunks(len * dt.size_of()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_back_tensor_serves_the_next_request_of_its_size() {
        let p = TensorPool::new();
        let a = p.tensor::<f32>(&[2, 3], &[1.0; 6]).unwrap();
        p.give(a);
        let b = p.tensor::<f32>(&[3, 2], &[2.0; 6]).unwrap();
        assert_eq!(b.shape(), &[3, 2]);
        assert_eq!(b.try_as_plain_ram().unwrap().as_slice::<f32>().unwrap(), &[2.0; 6]);
        let c = p.tensor::<f32>(&[4], &[0.0; 4]).unwrap();
        let n = p.counters();
        assert_eq!((n.allocations, n.reused, n.bytes_copied), (2, 1, 64));
        p.give(b);
        p.give(c);
        assert_eq!(p.kept(), (2, 2));
        p.set_enabled(false);
        assert_eq!(p.kept(), (0, 0));
        let _ = p.tensor::<f32>(&[2, 3], &[1.0; 6]).unwrap();
        assert_eq!(p.counters().allocations, 3, "off: every buffer is new");
        assert!(p.tensor::<f32>(&[2, 2], &[1.0; 3]).is_err());
        assert_eq!(chunks(1), 1);
        assert_eq!(chunks(2048), 1);
        assert_eq!(chunks(2049), 2);
    }

    /// Quantized values cross subgraphs as u8: a kept u8 buffer serves
    /// only u8 requests of its element count.
    #[test]
    fn kept_buffers_serve_their_own_type_only() {
        let p = TensorPool::new();
        p.give(p.tensor::<u8>(&[6], &[7; 6]).unwrap());
        let f = p.tensor::<f32>(&[6], &[1.0; 6]).unwrap();
        assert_eq!(p.counters().reused, 0, "an f32 request does not take the u8 buffer");
        let u = p.tensor::<u8>(&[2, 3], &[9; 6]).unwrap();
        assert_eq!(p.counters().reused, 1);
        assert_eq!(u.try_as_plain_ram().unwrap().as_slice::<u8>().unwrap(), &[9; 6]);
        assert_eq!(f.datum_type(), DatumType::F32);
    }

    #[test]
    fn counters_count_the_page_faults_of_fresh_memory() {
        let before = pool().counters();
        let mut block = vec![0u8; 16 << 20];
        for i in (0..block.len()).step_by(4096) {
            block[i] = 1;
        }
        std::hint::black_box(&block);
        let faults = pool().counters().since(&before).page_faults;
        assert!(faults >= 2048, "16 MiB touched once per page: {faults} faults counted");
    }
}
