//! Roofline latency of a kernel on one processor: a fixed launch overhead plus
//! the larger of compute time (FLOPs at peak throughput times an efficiency
//! that rises with channel count on GPUs and DSPs, NN-Stretch Fig. 7) and
//! memory time (bytes at sustained bandwidth), both at the precision the
//! processor runs ([`crate::precision`]).

use crate::features::Work;
use crate::kernels::OpClass;
use crate::profile::ProcessorProfile;

/// Fraction of peak throughput a kernel with `channels` output channels reaches.
pub fn efficiency(p: &ProcessorProfile, channels: usize) -> f64 {
    let half = p.half_efficiency_channels.as_ref().map_or(0.0, |f| f.value);
    let width = if half > 0.0 {
        channels as f64 / (channels as f64 + half)
    } else {
        1.0
    };
    p.efficiency.value * width
}

/// Predicted milliseconds of a kernel of class `class` with work `w` on processor `p`.
pub fn kernel_ms(p: &ProcessorProfile, class: OpClass, w: &Work) -> f64 {
    let dw = match (class, &p.depthwise_efficiency) {
        (OpClass::DwConv, Some(f)) => f.value,
        _ => 1.0,
    };
    let compute = w.flops as f64
        / (p.peak_gflops.value * p.compute_rate() * 1e9 * (dw * efficiency(p, w.out_channels)).max(1e-6));
    (p.kernel_overhead_us.value / 1e3 + 1e3 * compute).max(memory_ms(p, w))
}

/// The memory side of [`kernel_ms`]: launch overhead plus the kernel's bytes
/// at the sustained bandwidth, a time no kernel beats. Unlike the compute
/// side it does not rest on `peak_gflops`, which a fit folds into an
/// average effective throughput that large convolutions far exceed.
pub fn memory_ms(p: &ProcessorProfile, w: &Work) -> f64 {
    p.kernel_overhead_us.value / 1e3 + 1e3 * w.bytes as f64 * p.bytes_ratio() / (p.bandwidth_gbs.value * 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Figure, ProcessorKind};

    fn fig(value: f64) -> Figure {
        Figure {
            value,
            source: "test".into(),
        }
    }

    fn gpu(half: f64) -> ProcessorProfile {
        ProcessorProfile {
            kind: ProcessorKind::Gpu,
            peak_gflops: fig(100.0),
            bandwidth_gbs: fig(10.0),
            kernel_overhead_us: fig(10.0),
            efficiency: fig(0.5),
            half_efficiency_channels: Some(fig(half)),
            depthwise_efficiency: Some(fig(0.5)),
            subgraph_overhead_us: None,
            fusion: None,
            regressors: None,
            calibration: None,
            supports: None,
            unsupported: None,
            ops_source: None,
            precision: None,
            rated_precision: None,
            regressors_at: Default::default(),
            lacks: None,
            speedup: Default::default(),
        }
    }

    #[test]
    fn compute_and_memory_bound() {
        let p = gpu(0.0);
        let compute = Work {
            flops: 1_000_000_000,
            params: 0,
            bytes: 1000,
            out_channels: 64,
        };
        assert!((kernel_ms(&p, OpClass::Conv, &compute) - (0.01 + 20.0)).abs() < 1e-9);
        assert!((kernel_ms(&p, OpClass::DwConv, &compute) - (0.01 + 40.0)).abs() < 1e-9);
        let memory = Work {
            flops: 10,
            bytes: 100_000_000,
            ..compute
        };
        assert!((kernel_ms(&p, OpClass::Conv, &memory) - (0.01 + 10.0)).abs() < 1e-9);
    }

    #[test]
    fn precision_scales_compute_by_its_speedup_and_memory_by_element_size() {
        use crate::precision::Precision;
        let mut p = gpu(0.0);
        let compute = Work {
            flops: 1_000_000_000,
            params: 0,
            bytes: 1000,
            out_channels: 64,
        };
        let memory = Work {
            flops: 10,
            bytes: 100_000_000,
            ..compute
        };
        p.speedup.insert(Precision::Int8, fig(4.0));
        let fp32 = (
            kernel_ms(&p, OpClass::Conv, &compute),
            kernel_ms(&p, OpClass::Conv, &memory),
        );
        p.precision = Some(Precision::Int8);
        assert!((kernel_ms(&p, OpClass::Conv, &compute) - (0.01 + 5.0)).abs() < 1e-9);
        assert!((kernel_ms(&p, OpClass::Conv, &memory) - (0.01 + 2.5)).abs() < 1e-9);
        assert!((fp32.0 - 20.01).abs() < 1e-9 && (fp32.1 - 10.01).abs() < 1e-9);
        p.precision = Some(Precision::Fp16);
        assert!(p.precision_problem("gpu").unwrap().contains("no rate at fp16"));
    }

    #[test]
    fn wider_kernels_are_more_efficient_on_gpus() {
        let p = gpu(64.0);
        assert!((efficiency(&p, 64) - 0.25).abs() < 1e-12);
        assert!(efficiency(&p, 512) > efficiency(&p, 128));
    }
}
