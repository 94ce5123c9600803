//! `scheduler-rt` will own the runtime: processor-level subgraph partitioning
//! of annotated graphs, engines (tract, onnxruntime), CPU/DSP/GPU-style
//! workers, meeting points, adaptive re-placement, the multi-DNN schedulers
//! and the simulator that replays predicted latencies through the same policies.
//!
//! It builds on [`graph_ir`]; nothing is implemented here yet.
