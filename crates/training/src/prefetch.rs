//! An epoch's batches prepared on the host by a thread of their own, a few
//! batches ahead of the training step, so that a GPU step does not wait for
//! the CPU to resize, augment and normalise the next batch.

use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::Scope;

use graph_ir::rng::SplitMix64;

use crate::data::{Dataset, Transform};

/// Batches prepared ahead of the one being trained on.
const AHEAD: usize = 2;

/// One batch as the host prepares it.
pub(crate) struct HostBatch {
    /// `[n, C, H, W]` inputs, augmented and normalised.
    pub images: Vec<f32>,
    pub labels: Vec<usize>,
    /// `[n, classes]` one-hot targets.
    pub onehot: Vec<f32>,
}

impl HostBatch {
    pub fn len(&self) -> usize {
        self.labels.len()
    }
}

/// Starts a thread in `scope` that prepares the batches of `order` (chunks
/// of `batch_size`) in order, drawing augmentation from `rng` exactly as
/// preparing them one after another on the caller's thread would, so the
/// batches do not depend on the thread. The thread stops when the receiver
/// is dropped.
pub(crate) fn batches<'scope>(
    scope: &'scope Scope<'scope, '_>,
    transform: &'scope Transform,
    data: &'scope dyn Dataset,
    order: &'scope [usize],
    batch_size: usize,
    classes: usize,
    mut rng: SplitMix64,
) -> Receiver<HostBatch> {
    let (tx, rx) = sync_channel(AHEAD);
    scope.spawn(move || {
        for idx in order.chunks(batch_size) {
            let images = transform.batch(data, idx, Some(&mut rng));
            let labels: Vec<usize> = idx.iter().map(|&i| data.label(i)).collect();
            let mut onehot = vec![0f32; labels.len() * classes];
            for (r, &l) in labels.iter().enumerate() {
                onehot[r * classes + l] = 1.0;
            }
            if tx.send(HostBatch { images, labels, onehot }).is_err() {
                return;
            }
        }
    });
    rx
}
