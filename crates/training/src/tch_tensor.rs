//! Moving tensors between burn and LibTorch (`tch` builds only): the
//! LibTorch tensor behind a burn tensor, and a LibTorch result as a burn
//! tensor again.
#![allow(deprecated)]

use burn::backend::LibTorch;
use burn::backend::libtorch::TchTensor;
use burn::tensor::Tensor;
use tch::Tensor as T;

/// The LibTorch tensor behind `t` (its inner tensor when `t` is on an
/// autodiff device); `None` when `t` does not live on LibTorch.
pub(crate) fn tch_of<const D: usize>(t: &Tensor<D>) -> Option<T> {
    let inner = if t.is_autodiff() { t.clone().inner() } else { t.clone() };
    Some(inner.try_into_primitive::<LibTorch>().ok()?.tensor)
}

/// `t` as a burn tensor on LibTorch's (non-autodiff) device.
pub(crate) fn burn_of<const D: usize>(t: T) -> Tensor<D> {
    Tensor::from_primitive::<LibTorch>(TchTensor::new(t))
}

pub(crate) fn to_tch<const D: usize>(t: &Tensor<D>) -> T {
    tch_of(t).expect("--autograd libtorch on a LibTorch device")
}

pub(crate) fn dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}
