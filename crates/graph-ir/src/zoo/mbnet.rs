//! `mbnet-mini`: a 3x3 stem conv (16 channels, ReLU6) and three stages of
//! MobileNetV2 inverted residuals (expansion 4, depthwise 3x3, linear
//! bottleneck; 24, 32, 64 channels, two blocks each, each stage downsampling
//! once), a 1x1 conv to 128 channels, classifier.

use super::ZooOptions;
use crate::builder::{Builder, ConvSpec};
use crate::ops::UnaryOp;
use crate::{Graph, GraphError, Outlet};

const RELU6: UnaryOp = UnaryOp::Clip {
    min: Some(0.0),
    max: Some(6.0),
};

fn inverted(
    b: &mut Builder,
    name: &str,
    x: Outlet,
    cin: usize,
    cout: usize,
    stride: usize,
) -> Result<Outlet, GraphError> {
    let mid = cin * 4;
    let e = b.conv_bn(&format!("{name}.expand"), x, ConvSpec::new(mid, 1, 1), false)?;
    let e = b.unary(&format!("{name}.expand.act"), e, RELU6)?;
    let d = b.conv_bn(
        &format!("{name}.dw"),
        e,
        ConvSpec::new(mid, 3, stride).group(mid),
        false,
    )?;
    let d = b.unary(&format!("{name}.dw.act"), d, RELU6)?;
    let p = b.conv_bn(&format!("{name}.project"), d, ConvSpec::new(cout, 1, 1), false)?;
    if stride == 1 && cin == cout {
        b.add(&format!("{name}.add"), p, x)
    } else {
        Ok(p)
    }
}

pub fn build(o: &ZooOptions) -> Result<Graph, GraphError> {
    let mut b = Builder::new("mbnet-mini");
    let x = b.input("input", &[1, 3, o.input_size, o.input_size])?;
    let y = b.conv_bn("stem", x, ConvSpec::new(16, 3, 1), false)?;
    let mut y = b.unary("stem.act", y, RELU6)?;
    let mut c = 16;
    for (s, width) in [24, 32, 64].into_iter().enumerate() {
        for i in 0..2 {
            let stride = if i == 0 { 2 } else { 1 };
            y = inverted(&mut b, &format!("stage{}.{i}", s + 1), y, c, width, stride)?;
            c = width;
        }
    }
    let y = b.conv_bn("last", y, ConvSpec::new(128, 1, 1), false)?;
    let y = b.unary("last.act", y, RELU6)?;
    let y = b.classifier("head", y, o.classes)?;
    b.finish("logits", y)
}
