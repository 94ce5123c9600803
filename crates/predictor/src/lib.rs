//! `predictor` owns latency prediction: kernel detection by fusion rules
//! ([`kernels`]), nn-Meter style features ([`features`]), the roofline model
//! ([`analytic`]), device profiles with communication costs ([`profile`],
//! `configs/devices/*.toml`), random-forest regression ([`forest`]) and
//! block-level predictors trained on real phone latencies ([`phone`]), and the
//! profiler that measures kernels on an engine ([`profiler`]). It exposes the
//! [`LatencyModel`] trait that branching and the runtime use, implemented by
//! [`DeviceModel`]: per-kernel regressors fitted from the profiler's CSV
//! ([`fit`]) where a profile names them, the analytic model elsewhere.

pub mod analytic;
pub mod calibration;
mod device_model;
pub mod features;
pub mod fit;
pub mod forest;
pub mod kernels;
mod model;
pub mod phone;
pub mod precision;
pub mod profile;
pub mod profiler;

pub use device_model::DeviceModel;
pub use model::{AnalyticModel, KernelPrediction, LatencyModel, PredictError, Prediction, Source};
pub use precision::Precision;
pub use profile::{DeviceProfile, ProfileError};
