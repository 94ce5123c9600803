use super::*;
use onnx_ir::NodeProto;
use std::cell::Cell;

fn ctx<'a>(proto: &'a NodeProto, budget: &'a Cell<usize>) -> NodeCtx<'a> {
    NodeCtx {
        proto,
        name: "fold".into(),
        inputs: vec![],
        opset: 17,
        fold_budget: budget,
    }
}

#[test]
fn expand_and_tile_fold() {
    let (proto, budget) = (NodeProto::new(), Cell::new(1 << 20));
    let ctx = ctx(&proto, &budget);
    let x = Val {
        dtype: DType::I64,
        shape: vec![2, 1],
        data: Data::I(vec![1, 2]),
    };
    let e = expand(&ctx, &x, &[3, 1, 3]).unwrap();
    assert_eq!(e.shape, [3, 2, 3]);
    assert_eq!(e.ints()[..6], [1, 1, 1, 2, 2, 2]);
    let t = tile(&ctx, &x, &[2, 3]).unwrap();
    assert_eq!(t.shape, [4, 3]);
    assert_eq!(t.ints(), [1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2]);
    assert!(expand(&ctx, &x, &[3, 2]).is_err());
    assert!(tile(&ctx, &x, &[2]).is_err());
}

#[test]
fn budget_is_shared_by_every_fold_of_an_import() {
    assert_eq!(fold_budget(9_311), FOLD_BUDGET_FLOOR);
    assert_eq!(fold_budget(3 << 30), 6 << 30);
    assert_eq!(fold_budget(usize::MAX), FOLD_BUDGET_CEILING);
    let (proto, budget) = (NodeProto::new(), Cell::new(100));
    let ctx = ctx(&proto, &budget);
    assert_eq!(folded_len(&ctx, &[5, 2]).unwrap(), 10);
    assert_eq!(budget.get(), 20);
    let err = folded_len(&ctx, &[3]).unwrap_err().to_string();
    assert!(err.contains("too large to fold"), "{err}");
    assert_eq!(budget.get(), 20, "a refused fold takes nothing");
    assert!(folded_len(&ctx, &[usize::MAX, 2]).is_err());
}
