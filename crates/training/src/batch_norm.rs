//! BatchNorm in training mode: normalisation by the batch's own statistics,
//! differentiated through them.

use burn::tensor::Tensor;

/// Output of [`batch_norm_train`].
pub struct BatchNormTrain {
    pub output: Tensor<4>,
    /// Per-channel batch mean, detached.
    pub mean: Tensor<1>,
    /// Per-channel population (biased) variance, detached, without epsilon.
    pub variance: Tensor<1>,
}

/// Normalises `x` (`[n, c, h, w]`) per channel by its batch mean and
/// population variance, then scales by `gamma` and shifts by `beta`; the
/// output's gradient reaches `x` through the statistics as well.
///
/// Each statistic is a mean over `w`, then `h`, then `n`, never one
/// reduction over all `n·h·w` values, and the reductions the backward pass
/// takes over the broadcast axes are per axis too. A float32 sum rounds in
/// proportion to the length of the run it accumulates, and BatchNorm's input
/// gradient is the difference of nearly equal sums, so reducing per axis
/// keeps these gradients as close to the exact ones as a framework that sums
/// pairwise (PyTorch), where one reduction over `n·h·w` values is off by
/// orders of magnitude more on large feature maps.
pub fn batch_norm_train(x: Tensor<4>, gamma: Tensor<1>, beta: Tensor<1>, epsilon: f64) -> BatchNormTrain {
    let c = x.dims()[1];
    let mean = x.clone().mean_dim(3).mean_dim(2).mean_dim(0);
    let centred = x - mean.clone();
    let variance = (centred.clone() * centred.clone()).mean_dim(3).mean_dim(2).mean_dim(0);
    let scale = gamma.reshape([1, c, 1, 1]) / variance.clone().add_scalar(epsilon).sqrt();
    BatchNormTrain {
        output: centred * scale + beta.reshape([1, c, 1, 1]),
        mean: mean.detach().reshape([c]),
        variance: variance.detach().reshape([c]),
    }
}
