//! The kernels the profiler measures and their configurations: sampled from
//! the shapes real CNNs use (ResNet, MobileNet, RegNet stages), drawn at
//! random, or perturbed around a configuration (adaptive sampling).

use crate::forest::SplitMix64;
use crate::kernels::OpClass;
use serde::Serialize;
use std::fmt;

/// A kernel the profiler measures, named by the fusion chain that
/// [`crate::kernels::detect`] finds in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelKind {
    /// Conv, BatchNorm, ReLU.
    ConvBnRelu,
    /// Depthwise conv, BatchNorm, ReLU.
    DwConvBnRelu,
    /// Gemm with bias.
    Fc,
    /// MaxPool with "same" padding.
    Pool,
    /// GlobalAveragePool.
    Gap,
    /// Add of two feature maps, then ReLU.
    AddRelu,
    /// BatchNorm, ReLU.
    BnRelu,
    /// ReLU alone.
    Act,
    /// Concat of 2 to 4 feature maps along channels.
    Concat,
}

impl KernelKind {
    pub const ALL: [KernelKind; 9] = [
        KernelKind::ConvBnRelu,
        KernelKind::DwConvBnRelu,
        KernelKind::Fc,
        KernelKind::Pool,
        KernelKind::Gap,
        KernelKind::AddRelu,
        KernelKind::BnRelu,
        KernelKind::Act,
        KernelKind::Concat,
    ];

    /// The fusion chain, as written in the CSV `class` column.
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::ConvBnRelu => "conv+bn+act",
            KernelKind::DwConvBnRelu => "dwconv+bn+act",
            KernelKind::Fc => "fc",
            KernelKind::Pool => "pool",
            KernelKind::Gap => "gap",
            KernelKind::AddRelu => "add+act",
            KernelKind::BnRelu => "bn+act",
            KernelKind::Act => "act",
            KernelKind::Concat => "concat",
        }
    }

    /// The class of the kernel's first op, which names its features.
    pub fn op_class(self) -> OpClass {
        match self {
            KernelKind::ConvBnRelu => OpClass::Conv,
            KernelKind::DwConvBnRelu => OpClass::DwConv,
            KernelKind::Fc => OpClass::Fc,
            KernelKind::Pool => OpClass::Pool,
            KernelKind::Gap => OpClass::Gap,
            KernelKind::AddRelu => OpClass::Add,
            KernelKind::BnRelu => OpClass::Bn,
            KernelKind::Act => OpClass::Act,
            KernelKind::Concat => OpClass::Concat,
        }
    }

    /// The kind whose forest predicts kernels led by `class`, if any.
    pub fn of_class(class: OpClass) -> Option<KernelKind> {
        KernelKind::ALL.into_iter().find(|k| k.op_class() == class)
    }

    /// The kind named `name` (as [`KernelKind::name`] writes it).
    pub fn from_name(name: &str) -> Option<KernelKind> {
        KernelKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Serialised as its [`KernelKind::name`].
impl Serialize for KernelKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl fmt::Display for KernelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a configuration came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// Shapes of ResNet, MobileNet and RegNet layers.
    Cnn,
    /// Drawn at random within the limits.
    Random,
    /// A neighbour of a badly predicted configuration.
    Adaptive,
    /// A kernel of a whole model, timed inside it ([`super::in_model`]).
    InModel,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Cnn => "cnn",
            Origin::Random => "random",
            Origin::Adaptive => "adaptive",
            Origin::InModel => "in-model",
        }
    }

    pub fn from_name(name: &str) -> Option<Origin> {
        [Origin::Cnn, Origin::Random, Origin::Adaptive, Origin::InModel]
            .into_iter()
            .find(|o| o.name() == name)
    }
}

/// One kernel configuration. Input feature maps are `[1, cin, h, h]` (`fc`:
/// `[1, cin]`); fields a kind does not use are 1 (`k`, `s`) or equal to
/// `cin` (`cout` where the op keeps channels).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelConfig {
    pub kind: KernelKind,
    pub h: usize,
    pub cin: usize,
    pub cout: usize,
    pub k: usize,
    pub s: usize,
    /// Channels of each input of a concat (2 to 4); empty for other kinds.
    pub parts: Vec<usize>,
}

impl fmt::Display for KernelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.kind;
        match k {
            KernelKind::ConvBnRelu => write!(
                f,
                "{k}(h{} {}->{} k{} s{})",
                self.h, self.cin, self.cout, self.k, self.s
            ),
            KernelKind::DwConvBnRelu | KernelKind::Pool => {
                write!(f, "{k}(h{} c{} k{} s{})", self.h, self.cin, self.k, self.s)
            }
            KernelKind::Fc => write!(f, "{k}({}->{})", self.cin, self.cout),
            KernelKind::Concat => write!(f, "{k}(h{} c{:?})", self.h, self.parts),
            _ => write!(f, "{k}(h{} c{})", self.h, self.cin),
        }
    }
}

impl KernelConfig {
    fn spatial(kind: KernelKind, h: usize, c: usize) -> KernelConfig {
        KernelConfig {
            kind,
            h,
            cin: c,
            cout: c,
            k: 1,
            s: 1,
            parts: Vec::new(),
        }
    }

    /// The configuration of a kernel whose features (named by
    /// [`crate::features::feature_names`] of `kind.op_class()`) are `f`;
    /// `None` when they do not describe a kernel of that kind.
    pub fn from_features(kind: KernelKind, f: &[f64]) -> Option<KernelConfig> {
        let u = |i: usize| -> Option<usize> {
            let v = *f.get(i)?;
            (v.fract() == 0.0 && v >= 1.0 && v <= u32::MAX as f64).then_some(v as usize)
        };
        let spatial = |c| KernelConfig::spatial(kind, u(0).unwrap_or(0), c);
        let c = match kind {
            KernelKind::ConvBnRelu | KernelKind::DwConvBnRelu => KernelConfig {
                cout: u(2)?,
                k: u(3)?,
                s: u(4)?,
                ..spatial(u(1)?)
            },
            KernelKind::Pool => KernelConfig {
                k: u(3)?,
                s: u(4)?,
                ..spatial(u(1)?)
            },
            KernelKind::Fc => KernelConfig {
                h: 1,
                cout: u(1)?,
                ..spatial(u(0)?)
            },
            KernelKind::AddRelu | KernelKind::Gap | KernelKind::BnRelu | KernelKind::Act => spatial(u(1)?),
            KernelKind::Concat => {
                let n = u(1)?;
                let parts = (0..n.min(4)).map(|i| u(2 + i)).collect::<Option<Vec<_>>>()?;
                KernelConfig {
                    cin: parts.iter().sum(),
                    cout: parts.iter().sum(),
                    parts,
                    ..spatial(1)
                }
            }
        };
        (c.h >= 1).then_some(c)
    }
}

/// Feature-map sizes of the stages of ImageNet CNNs and the channel widths
/// their layers use there (ResNet-18/50, MobileNetV2/V3, RegNetX/Y).
const STAGES: [(usize, &[usize]); 6] = [
    (224, &[3, 16, 32]),
    (112, &[16, 24, 32, 64, 96]),
    (56, &[24, 32, 48, 64, 96, 128, 144, 256]),
    (28, &[32, 40, 64, 128, 192, 240, 256, 512]),
    (14, &[64, 80, 96, 112, 160, 256, 384, 480, 576, 672, 1024]),
    (7, &[160, 320, 368, 512, 960, 1280, 2048]),
];

/// Kernel sizes, weighted towards the common 1 and 3.
const KERNELS: [usize; 8] = [1, 1, 1, 3, 3, 3, 5, 7];
const FC_IN: [usize; 7] = [256, 512, 576, 1024, 1280, 1536, 2048];
const FC_OUT: [usize; 4] = [10, 100, 1000, 1280];

fn pick<T: Copy>(rng: &mut SplitMix64, items: &[T]) -> T {
    items[rng.below(items.len())]
}

/// Uniform in `[0, 1)`.
fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Log-uniform integer in `[lo, hi]`.
fn log_uniform(rng: &mut SplitMix64, lo: usize, hi: usize) -> usize {
    let (l, h) = ((lo as f64).ln(), ((hi + 1) as f64).ln());
    ((l + (h - l) * unit(rng)).exp() as usize).clamp(lo, hi)
}

/// A configuration with the shapes of a real CNN layer.
pub fn cnn(kind: KernelKind, rng: &mut SplitMix64) -> KernelConfig {
    let stage = rng.below(STAGES.len());
    let (h, widths) = STAGES[stage];
    let c = pick(rng, widths);
    let wider = STAGES[(stage + 1).min(STAGES.len() - 1)].1;
    let spatial = KernelConfig::spatial(kind, h, c);
    match kind {
        KernelKind::ConvBnRelu => {
            let s = pick(rng, &[1, 1, 1, 2]);
            let cout = if s == 2 { pick(rng, wider) } else { pick(rng, widths) };
            let k = if h == 224 {
                pick(rng, &[3, 7])
            } else {
                pick(rng, &KERNELS)
            };
            KernelConfig { cout, k, s, ..spatial }
        }
        KernelKind::DwConvBnRelu => KernelConfig {
            k: pick(rng, &[3, 3, 5, 7]),
            s: pick(rng, &[1, 1, 2]),
            ..spatial
        },
        KernelKind::Fc => KernelConfig {
            h: 1,
            cout: pick(rng, &FC_OUT),
            ..KernelConfig::spatial(kind, 1, pick(rng, &FC_IN))
        },
        KernelKind::Pool => KernelConfig {
            k: pick(rng, &[2, 3, 3]),
            s: pick(rng, &[1, 2, 2]),
            ..spatial
        },
        KernelKind::Gap => {
            let (h, widths) = STAGES[rng.below(2) + 4];
            KernelConfig::spatial(kind, h, pick(rng, widths))
        }
        KernelKind::AddRelu | KernelKind::BnRelu | KernelKind::Act => spatial,
        KernelKind::Concat => concat(spatial, |rng| pick(rng, widths), rng),
    }
}

fn concat(base: KernelConfig, mut width: impl FnMut(&mut SplitMix64) -> usize, rng: &mut SplitMix64) -> KernelConfig {
    let n = 2 + rng.below(3);
    let parts: Vec<usize> = (0..n).map(|_| width(rng)).collect();
    KernelConfig {
        cin: parts.iter().sum(),
        cout: parts.iter().sum(),
        parts,
        ..base
    }
}

/// A configuration drawn at random: sizes log-uniform in `[4, 224]`,
/// channels log-uniform in `[8, 1024]`.
pub fn random(kind: KernelKind, rng: &mut SplitMix64) -> KernelConfig {
    let h = log_uniform(rng, 4, 224);
    let c = channels8(log_uniform(rng, 8, 1024));
    let spatial = KernelConfig::spatial(kind, h, c);
    match kind {
        KernelKind::ConvBnRelu => KernelConfig {
            cout: channels8(log_uniform(rng, 8, 1024)),
            k: pick(rng, &KERNELS),
            s: pick(rng, &[1, 2]),
            ..spatial
        },
        KernelKind::DwConvBnRelu => KernelConfig {
            k: pick(rng, &[3, 5, 7]),
            s: pick(rng, &[1, 2]),
            ..spatial
        },
        KernelKind::Fc => KernelConfig {
            h: 1,
            cout: log_uniform(rng, 8, 4096),
            ..KernelConfig::spatial(kind, 1, log_uniform(rng, 16, 4096))
        },
        KernelKind::Pool => KernelConfig {
            k: pick(rng, &[2, 3, 5]),
            s: pick(rng, &[1, 2]),
            ..spatial
        },
        KernelKind::Gap | KernelKind::AddRelu | KernelKind::BnRelu | KernelKind::Act => spatial,
        KernelKind::Concat => concat(spatial, |rng| channels8(log_uniform(rng, 8, 512)), rng),
    }
}

/// `v` rounded to a multiple of 8 (at least 8), as CNN channel counts are;
/// counts under 8 (RGB inputs) are kept.
fn channels8(v: usize) -> usize {
    if v < 8 { v.max(1) } else { (v + 4) / 8 * 8 }
}

/// A neighbour of `c` with its channel counts (cin/cout, or each concat
/// input) scaled by independent factors in `[0.75, 1.25]` and rounded to
/// multiples of 8; other fields kept.
pub fn perturb(c: &KernelConfig, rng: &mut SplitMix64) -> KernelConfig {
    let mut scale = |v: usize| channels8((v as f64 * (0.75 + 0.5 * unit(rng))).round() as usize);
    let mut n = c.clone();
    match c.kind {
        KernelKind::ConvBnRelu | KernelKind::Fc => {
            n.cin = scale(c.cin);
            n.cout = scale(c.cout);
        }
        KernelKind::Concat => {
            n.parts = c.parts.iter().map(|&p| scale(p)).collect();
            n.cin = n.parts.iter().sum();
            n.cout = n.cin;
        }
        _ => {
            n.cin = scale(c.cin);
            n.cout = n.cin;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in KernelKind::ALL {
            assert_eq!(KernelKind::from_name(k.name()), Some(k));
        }
        assert_eq!(Origin::from_name("adaptive"), Some(Origin::Adaptive));
    }

    #[test]
    fn samples_are_well_formed_and_perturbations_keep_the_shape() {
        let mut rng = SplitMix64::new(7);
        for kind in KernelKind::ALL {
            for _ in 0..50 {
                for c in [cnn(kind, &mut rng), random(kind, &mut rng)] {
                    assert!(c.h >= 1 && c.cin >= 1 && c.cout >= 1 && c.k >= 1 && c.s >= 1, "{c}");
                    assert_eq!(c.kind == KernelKind::Concat, !c.parts.is_empty(), "{c}");
                    let p = perturb(&c, &mut rng);
                    assert_eq!((p.kind, p.h, p.k, p.s), (c.kind, c.h, c.k, c.s));
                    assert!(p.cin * 4 + 32 >= c.cin * 3 && p.cin * 4 <= c.cin * 5 + 32, "{c} -> {p}");
                    let counts = if p.parts.is_empty() {
                        vec![p.cin, p.cout]
                    } else {
                        p.parts.clone()
                    };
                    assert!(counts.iter().all(|v| *v < 8 || v.is_multiple_of(8)), "{c} -> {p}");
                }
            }
        }
    }
}
