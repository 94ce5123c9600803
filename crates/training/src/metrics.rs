//! Classification metrics from score rows and labels.

/// Sums over a set of images: loss, correct top-1 and top-5, count.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub loss: f64,
    pub top1: usize,
    pub top5: usize,
    pub count: usize,
}

impl Tally {
    /// Adds `n` images' scores (`[n, classes]` row-major) against their labels;
    /// `loss` is the batch's mean loss.
    pub fn add(&mut self, scores: &[f32], labels: &[usize], loss: f64) {
        let n = labels.len();
        let classes = scores.len() / n.max(1);
        for (row, &label) in scores.chunks_exact(classes).zip(labels) {
            let s = row[label];
            let above = row.iter().filter(|&&v| v > s).count();
            self.top1 += usize::from(above == 0);
            self.top5 += usize::from(above < 5);
        }
        self.loss += loss * n as f64;
        self.count += n;
    }

    pub fn mean_loss(&self) -> f64 {
        self.loss / self.count.max(1) as f64
    }

    /// Top-1 accuracy in percent.
    pub fn top1(&self) -> f64 {
        100.0 * self.top1 as f64 / self.count.max(1) as f64
    }

    /// Top-5 accuracy in percent.
    pub fn top5(&self) -> f64 {
        100.0 * self.top5 as f64 / self.count.max(1) as f64
    }
}

/// Mean cross-entropy of score rows against labels, computed on the host.
pub fn cross_entropy(scores: &[f32], labels: &[usize]) -> f64 {
    let classes = scores.len() / labels.len().max(1);
    let mut total = 0.0;
    for (row, &label) in scores.chunks_exact(classes).zip(labels) {
        let max = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
        let lse = row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln() + max;
        total += lse - row[label] as f64;
    }
    total / labels.len().max(1) as f64
}

/// Row-wise softmax of `scores / temperature`.
pub fn softmax(scores: &[f32], classes: usize, temperature: f64) -> Vec<f32> {
    let mut out = Vec::with_capacity(scores.len());
    for row in scores.chunks_exact(classes) {
        let max = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
        let e: Vec<f64> = row.iter().map(|&v| ((v as f64 - max) / temperature).exp()).collect();
        let sum: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| (v / sum) as f32));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_counts_ties_in_favour_of_the_label() {
        let mut t = Tally::default();
        t.add(&[0.1, 0.9, 0.0, 0.5, 0.5, 0.2], &[1, 2], 1.0);
        assert_eq!((t.top1, t.top5, t.count), (1, 2, 2));
        assert_eq!(t.top1(), 50.0);
    }

    #[test]
    fn cross_entropy_of_uniform_scores_is_log_classes() {
        let ce = cross_entropy(&[0.0; 10], &[3]);
        assert!((ce - 10f64.ln()).abs() < 1e-9);
        let p = softmax(&[1.0, 1.0], 2, 4.0);
        assert_eq!(p, vec![0.5, 0.5]);
    }
}

/// Seconds one epoch spent in each phase of its training steps, with the
/// device waited for at the end of each phase (`Session::set_phase_times`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseTimes {
    pub steps: usize,
    /// Batch assembly on the host (and the teacher's scores when distilling).
    pub prepare: f64,
    /// Upload, forward pass, loss, and reading the loss and scores back.
    pub forward: f64,
    /// Backward pass (and convolution weight gradients taken outside autodiff).
    pub backward: f64,
    /// Optimizer update and BatchNorm running statistics.
    pub update: f64,
}

impl PhaseTimes {
    /// `prepare 1.2 ms, forward 3.4 ms, ...` per step.
    pub fn line(&self) -> String {
        let per = |s: f64| s * 1e3 / self.steps.max(1) as f64;
        format!(
            "per step ({} steps, device waited for after each phase): prepare {:.2} ms, forward {:.2} ms, backward {:.2} ms, update {:.2} ms",
            self.steps,
            per(self.prepare),
            per(self.forward),
            per(self.backward),
            per(self.update)
        )
    }
}
