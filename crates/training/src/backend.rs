//! Which burn backend runs training and inference.

use std::fmt;
use std::str::FromStr;

pub use burn::tensor::Device;

/// A burn backend: `flex` (pure-Rust CPU, always built) or `cuda[:INDEX]`
/// (NVIDIA GPU, only in builds with the `cuda` feature).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    #[default]
    Flex,
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
                let i = index
                    .parse()
                    .map_err(|_| format!("cuda device index '{index}' is not a number"))?;
                if cfg!(feature = "cuda") {
                    Ok(Backend::Cuda(i))
                } else {
                    Err("this stretch was built without CUDA; rebuild with `--features cuda`".into())
                }
            }
            other => Err(format!("unknown backend '{other}' (available: flex, cuda[:INDEX])")),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Flex => write!(f, "flex (CPU)"),
            Backend::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}
