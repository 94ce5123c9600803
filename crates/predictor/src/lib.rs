//! `predictor` will own latency prediction: kernel detection by fusion rules,
//! nn-Meter style features and per-kernel regressors, device profiles
//! (`configs/devices/*.toml`), the profiling harness and the communication-cost
//! model between processors. It exposes the `LatencyModel` trait that
//! branching and the runtime use.
//!
//! It builds on [`graph_ir`]; nothing is implemented here yet.
