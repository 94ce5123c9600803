//! Fitting predictors to measurements: the analytic model's figures
//! ([`analytic`]) and per-kernel-class random forests ([`regressors`]).

pub mod analytic;
pub mod regressors;

pub use analytic::{Figures, Sample};
pub use regressors::{FORMAT, KernelRegressors, RegressorError};
