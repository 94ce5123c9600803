//! `resnet-mini`: a 3x3 stem conv (16 channels), three stages of two basic
//! blocks (16, 32, 64 channels; the second and third downsample), classifier.

use super::ZooOptions;
use crate::builder::{Builder, ConvSpec};
use crate::{Graph, GraphError};

pub fn build(o: &ZooOptions) -> Result<Graph, GraphError> {
    let mut b = Builder::new("resnet-mini");
    let x = b.input("input", &[1, 3, o.input_size, o.input_size])?;
    let mut y = b.conv_bn("stem", x, ConvSpec::new(16, 3, 1), true)?;
    for (s, width) in [16, 32, 64].into_iter().enumerate() {
        for i in 0..2 {
            let stride = if s > 0 && i == 0 { 2 } else { 1 };
            y = b.basic_block(&format!("layer{}.{i}", s + 1), y, width, stride)?;
        }
    }
    let y = b.classifier("head", y, o.classes)?;
    b.finish("logits", y)
}
