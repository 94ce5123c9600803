//! Small reference CNNs built through the IR, for examples, tests and users
//! trying the toolchain: `resnet-mini` (three stages of ResNet basic blocks)
//! and `mbnet-mini` (MobileNetV2-style inverted residuals with depthwise
//! convolutions and ReLU6). Both have BatchNorm, a global-pool classifier,
//! weights without data (fill them with [`Graph::fill_missing_weights`]) and
//! are analysed into stem, three stages and head by
//! [`crate::analysis::analyze`].

mod mbnet;
mod resnet;

use crate::{Graph, GraphError};
use thiserror::Error;

/// Options of every zoo model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZooOptions {
    /// Side of the square RGB input (at least 16).
    pub input_size: usize,
    /// Classifier outputs.
    pub classes: usize,
}

impl Default for ZooOptions {
    fn default() -> ZooOptions {
        ZooOptions {
            input_size: 32,
            classes: 10,
        }
    }
}

#[derive(Debug, Error)]
pub enum ZooError {
    #[error("unknown zoo model `{name}`; available: {}", names().join(", "))]
    Unknown { name: String },
    #[error("--input-size {0} is too small: zoo models need at least 16")]
    InputSize(usize),
    #[error("--classes must be at least 1")]
    Classes,
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// The models [`build`] knows.
pub fn names() -> Vec<&'static str> {
    vec!["resnet-mini", "mbnet-mini"]
}

/// Builds zoo model `name`.
pub fn build(name: &str, o: &ZooOptions) -> Result<Graph, ZooError> {
    if o.input_size < 16 {
        return Err(ZooError::InputSize(o.input_size));
    }
    if o.classes == 0 {
        return Err(ZooError::Classes);
    }
    match name {
        "resnet-mini" => Ok(resnet::build(o)?),
        "mbnet-mini" => Ok(mbnet::build(o)?),
        _ => Err(ZooError::Unknown { name: name.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;

    #[test]
    fn every_model_has_three_stages_and_the_asked_shapes() {
        for name in names() {
            for (size, classes) in [(32, 10), (64, 100)] {
                let g = build(
                    name,
                    &ZooOptions {
                        input_size: size,
                        classes,
                    },
                )
                .unwrap();
                g.check().unwrap();
                let s = analyze(&g).unwrap();
                assert_eq!(s.stages.len(), 3, "{name}");
                assert_eq!(g.fact(g.outputs()[0].1).unwrap().shape, vec![1, classes], "{name}");
            }
        }
        assert!(matches!(
            build("vgg", &ZooOptions::default()),
            Err(ZooError::Unknown { .. })
        ));
        assert!(
            build(
                "resnet-mini",
                &ZooOptions {
                    input_size: 8,
                    classes: 10
                }
            )
            .is_err()
        );
    }
}
