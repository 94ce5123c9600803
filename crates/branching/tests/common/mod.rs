//! A small ResNet built in code, shared by the plan-search tests.

use graph_ir::Graph;
use graph_ir::builder::{Builder, ConvSpec};

/// Stem, two stages of two basic blocks (16 and 32 channels) and a
/// 10-class head, at 32x32.
pub fn resnet() -> Graph {
    let mut b = Builder::new("r");
    let x = b.input("x", &[1, 3, 32, 32]).expect("input");
    let mut y = b.conv_bn("stem", x, ConvSpec::new(16, 3, 2), true).expect("stem");
    for s in 0..2 {
        for i in 0..2 {
            let stride = if i == 0 { 2 } else { 1 };
            y = b.basic_block(&format!("l{s}.{i}"), y, 16 << s, stride).expect("block");
        }
    }
    let y = b.classifier("head", y, 10).expect("head");
    b.finish("y", y).expect("finish")
}
