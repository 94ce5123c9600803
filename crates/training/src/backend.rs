//! Which burn backend runs training and inference.

use std::fmt;
use std::str::FromStr;

pub use burn::tensor::Device;

/// A burn backend: `flex` (pure-Rust CPU, always built), `cuda[:INDEX]`
/// (NVIDIA GPU, only in builds with the `cuda` feature) or
/// `tch[:cpu|:cuda[:INDEX]]` (LibTorch, only in builds with the `tch`
/// feature).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    #[default]
    Flex,
    Cuda(usize),
    LibTorch(LibTorchTarget),
}

/// The LibTorch device a [`Backend::LibTorch`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LibTorchTarget {
    #[default]
    Cpu,
    Cuda(usize),
}

impl Backend {
    /// The inference device of this backend (`.autodiff()` it for training).
    pub fn device(self) -> Device {
        match self {
            Backend::Flex => Device::flex(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(i) => Device::cuda(i),
            #[cfg(not(feature = "cuda"))]
            Backend::Cuda(_) => unreachable!("parsing refuses cuda without the feature"),
            #[cfg(feature = "tch")]
            Backend::LibTorch(target) => libtorch_device(target),
            #[cfg(not(feature = "tch"))]
            Backend::LibTorch(_) => unreachable!("parsing refuses tch without the feature"),
        }
    }
}

/// The burn device of a LibTorch target. burn 0.22 deprecates its LibTorch
/// backend, but it is the GPU backend that builds from the package
/// registries alone (`scripts/build_libtorch.sh`).
#[cfg(feature = "tch")]
#[allow(deprecated)]
fn libtorch_device(target: LibTorchTarget) -> Device {
    match target {
        LibTorchTarget::Cpu => Device::libtorch(),
        LibTorchTarget::Cuda(i) => Device::libtorch_cuda(i),
    }
}

fn device_index(backend: &str, index: &str) -> Result<usize, String> {
    index
        .parse()
        .map_err(|_| format!("{backend} device index '{index}' is not a number"))
}

impl FromStr for LibTorchTarget {
    type Err = String;

    /// `cpu`, `cuda` or `cuda:INDEX`.
    fn from_str(s: &str) -> Result<LibTorchTarget, String> {
        let (name, index) = s.split_once(':').unwrap_or((s, "0"));
        match name {
            "cpu" if s == "cpu" => Ok(LibTorchTarget::Cpu),
            "cuda" => Ok(LibTorchTarget::Cuda(device_index("tch cuda", index)?)),
            _ => Err(format!(
                "unknown LibTorch device '{s}' (available: tch:cpu, tch:cuda[:INDEX])"
            )),
        }
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Backend, String> {
        let (name, index) = s.split_once(':').unwrap_or((s, "0"));
        match name {
            "flex" | "cpu" => Ok(Backend::Flex),
            "cuda" => {
                let i = device_index("cuda", index)?;
                if cfg!(feature = "cuda") {
                    Ok(Backend::Cuda(i))
                } else {
                    Err("this stretch was built without CUDA; rebuild with `--features cuda`".into())
                }
            }
            "tch" => {
                let target = match s.split_once(':') {
                    Some((_, target)) => target.parse()?,
                    None => LibTorchTarget::Cpu,
                };
                if cfg!(feature = "tch") {
                    Ok(Backend::LibTorch(target))
                } else {
                    Err("this stretch was built without LibTorch; run scripts/build_libtorch.sh".into())
                }
            }
            other => Err(format!(
                "unknown backend '{other}' (available: flex, cuda[:INDEX], tch[:cpu|:cuda[:INDEX]])"
            )),
        }
    }
}

impl fmt::Display for LibTorchTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LibTorchTarget::Cpu => write!(f, "cpu"),
            LibTorchTarget::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl Backend {
    /// The backend as `--backend` takes it (`flex`, `cuda:0`, `tch:cuda:0`).
    pub fn spec(&self) -> String {
        match self {
            Backend::Flex => "flex".into(),
            Backend::Cuda(i) => format!("cuda:{i}"),
            Backend::LibTorch(target) => format!("tch:{target}"),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Flex => write!(f, "flex (CPU)"),
            Backend::Cuda(i) => write!(f, "cuda:{i}"),
            Backend::LibTorch(target) => write!(f, "tch:{target} (LibTorch)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Backend, String> {
        s.parse()
    }

    #[test]
    fn flex_parses_in_every_build() {
        assert_eq!(parse("flex"), Ok(Backend::Flex));
        assert_eq!(parse("cpu"), Ok(Backend::Flex));
    }

    #[test]
    fn tch_targets_parse_with_the_feature_and_are_refused_without() {
        let cases = [
            ("tch", LibTorchTarget::Cpu),
            ("tch:cpu", LibTorchTarget::Cpu),
            ("tch:cuda", LibTorchTarget::Cuda(0)),
            ("tch:cuda:0", LibTorchTarget::Cuda(0)),
            ("tch:cuda:3", LibTorchTarget::Cuda(3)),
        ];
        for (text, target) in cases {
            let parsed = parse(text);
            if cfg!(feature = "tch") {
                assert_eq!(parsed, Ok(Backend::LibTorch(target)), "{text}");
            } else {
                let err = parsed.expect_err(text);
                assert!(err.contains("without LibTorch"), "{text}: {err}");
                assert!(err.contains("scripts/build_libtorch.sh"), "{text}: {err}");
            }
        }
    }

    #[test]
    fn malformed_tch_targets_are_refused_in_every_build() {
        for text in ["tch:gpu", "tch:cpu:1", "tch:", "tch:cuda:x", "tch:cuda:-1"] {
            let err = parse(text).expect_err(text);
            assert!(!err.contains("without LibTorch"), "{text}: {err}");
        }
        assert!(parse("tch:cuda:x").unwrap_err().contains("'x' is not a number"));
        assert!(parse("tch:gpu").unwrap_err().contains("tch:cuda[:INDEX]"));
    }

    #[test]
    fn cuda_parses_only_with_its_feature() {
        let parsed = parse("cuda:1");
        if cfg!(feature = "cuda") {
            assert_eq!(parsed, Ok(Backend::Cuda(1)));
        } else {
            assert!(parsed.unwrap_err().contains("without CUDA"));
        }
        assert!(parse("cuda:x").unwrap_err().contains("'x' is not a number"));
    }

    #[test]
    fn unknown_backends_list_the_available_ones() {
        let err = parse("wgpu").unwrap_err();
        assert!(err.contains("unknown backend 'wgpu'"), "{err}");
        assert!(err.contains("tch[:cpu|:cuda[:INDEX]]"), "{err}");
    }

    #[test]
    fn display_round_trips_through_parsing() {
        let backends = [
            Backend::LibTorch(LibTorchTarget::Cpu),
            Backend::LibTorch(LibTorchTarget::Cuda(2)),
        ];
        for backend in backends {
            let shown = backend.to_string();
            assert!(shown.ends_with(" (LibTorch)"), "{shown}");
            let text = shown.trim_end_matches(" (LibTorch)");
            if cfg!(feature = "tch") {
                assert_eq!(parse(text), Ok(backend));
            } else {
                assert!(parse(text).is_err());
            }
        }
        assert_eq!(
            Backend::LibTorch(LibTorchTarget::Cuda(2)).to_string(),
            "tch:cuda:2 (LibTorch)"
        );
    }
}
