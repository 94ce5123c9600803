//! Per-operator conformance: every model in `fixtures/ops/` (written by
//! `scripts/fixtures/make_op_models.py`) is converted by `stretch convert`;
//! the output must pass the full `onnx.checker` and give the same outputs as
//! the original in onnxruntime (max abs difference ≤ 1e-5), both judged by
//! `scripts/check_onnx.py`. Models named `unsupported_*` must instead fail
//! with one error line naming the operator, the node and the opset.

mod common;

use common::*;
use std::path::PathBuf;

/// Absolute tolerance of the onnxruntime comparison, original vs converted.
const ATOL: &str = "1e-5";

fn op_model(stem: &str) -> PathBuf {
    repo().join("fixtures/ops").join(format!("{stem}.onnx"))
}

/// Stems of the `fixtures/ops/*.onnx` files, sorted.
fn op_models() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo().join("fixtures/ops"))
        .expect("fixtures/ops exists (scripts/fixtures/make_op_models.py writes it)")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .map(|p| p.file_stem().and_then(|s| s.to_str()).expect("file name").to_string())
        .collect();
    v.sort();
    v
}

fn round_trip(stem: &str) {
    let model = op_model(stem);
    assert!(
        model.exists(),
        "{} is missing; run scripts/fixtures/make_op_models.py",
        model.display()
    );
    let dir = scratch(&format!("op-{stem}"));
    let converted = dir.join(format!("{stem}.converted.onnx"));
    let (model, converted) = (model.to_string_lossy(), converted.to_string_lossy());
    stretch_ok(&["convert", &model, "-o", &converted]);
    reference(&["check", &converted]);
    let cmp = reference(&["compare", &model, &converted, "--atol", ATOL]);
    assert!(cmp.contains("equal within"), "{stem}: {cmp}");
    let _ = std::fs::remove_dir_all(&dir);
}

macro_rules! op_tests {
    ($($stem:ident),* $(,)?) => {$(
        #[test]
        fn $stem() {
            round_trip(stringify!($stem));
        }
    )*
        #[test]
        fn every_op_model_has_a_test() {
            let listed = [$(stringify!($stem)),*];
            let models = op_models();
            let missing: Vec<&String> = models
                .iter()
                .filter(|s| !s.starts_with("unsupported_") && !listed.contains(&s.as_str()))
                .collect();
            assert!(missing.is_empty(), "fixtures/ops models without a test in op_models.rs: {missing:?}");
            let stale: Vec<&&str> = listed.iter().filter(|s| !models.iter().any(|m| m == *s)).collect();
            assert!(stale.is_empty(), "tests without a model in fixtures/ops: {stale:?}");
        }
    };
}

op_tests!(
    add_lastaxis_opset14,
    add_residual_opset13,
    add_twoinputs_opset13,
    averagepool_ceil_opset13,
    averagepool_ceilincludepad_opset17,
    averagepool_excludepad_opset13,
    averagepool_includepad_opset11,
    averagepool_samelower_opset11,
    batchnorm_eps_opset15,
    batchnorm_input_opset11,
    clip_attrs_opset6,
    clip_inputs_opset13,
    clip_maxattr_opset6,
    clip_maxonly_opset13,
    clip_minonly_opset11,
    clip_relu6_opset12,
    concat_channels_opset13,
    concat_negaxis_opset11,
    constant_castsplit_opset13,
    constant_clipbounds_opset13,
    constant_foldarith_opset13,
    constant_gatherweight_opset13,
    constant_ofshape_opset13,
    constant_output_opset13,
    constant_reshapedweight_opset13,
    constant_value_opset13,
    constant_valuefloat_opset13,
    constant_valueints_opset13,
    conv_1d_opset13,
    conv_asympads_opset15,
    conv_bias_opset11,
    conv_depthwise_opset14,
    conv_dilation_opset13,
    conv_dynamicbatch_opset13,
    conv_groups_opset13,
    conv_nobias_opset13,
    conv_samelower_opset13,
    conv_sameupper_opset13,
    conv_sameupperevenkernel_opset18,
    conv_strides_opset16,
    conv_valid_opset17,
    convtranspose_groupsdilation_opset13,
    convtranspose_outputshape_opset11,
    convtranspose_sameupper_opset13,
    convtranspose_stride2outpad_opset13,
    div_broadcast_opset14,
    dropout_inference_opset13,
    dropout_ratioattr_opset11,
    dropout_trainingfalse_opset13,
    expand_folded_opset13,
    flatten_axis0_opset13,
    flatten_axis2_opset11,
    flatten_default_opset13,
    flatten_negaxis_opset13,
    gemm_classifier_opset13,
    gemm_nobias_opset13,
    gemm_scalarbias_opset11,
    gemm_transa_opset11,
    gemm_transab_opset13,
    gemm_transb_opset13,
    globalaveragepool_basic_opset13,
    graph_initializerinputs_opset11,
    graph_namecollisions_opset13,
    graph_sharedvalues_opset13,
    graph_typeddata_opset13,
    graph_unnamednodes_opset13,
    hardsigmoid_alphabeta_opset13,
    hardsigmoid_default_opset11,
    hardswish_basic_opset14,
    identity_chain_opset13,
    identity_passthrough_opset14,
    identity_weight_opset13,
    matmul_2d_opset13,
    matmul_4d_opset13,
    matmul_batched_opset13,
    matmul_vectors_opset13,
    maxpool_1d_opset13,
    maxpool_ceil_opset12,
    maxpool_ceilpads_opset11,
    maxpool_dilation_opset12,
    maxpool_padsstrides_opset13,
    maxpool_sameupper_opset13,
    mul_channel_opset14,
    mul_scalar_opset13,
    pad_axes_opset18,
    pad_axesreflect_opset18,
    pad_constant_opset11,
    pad_constantdefault_opset13,
    pad_edge_opset11,
    pad_negative_opset13,
    pad_reflect_opset11,
    reducemean_allaxes_opset11,
    reducemean_inputaxes_opset18,
    reducemean_inputaxesnokeep_opset18,
    reducemean_keepdims_opset13,
    reducemean_noaxes_opset18,
    reducemean_nokeepdims_opset13,
    reducemean_noopempty_opset18,
    reducesum_axesattr_opset11,
    reducesum_axesinput_opset13,
    relu_basic_opset14,
    reshape_copydims_opset13,
    reshape_shapeslice_opset15,
    reshape_shapeslicesubgraph_opset13,
    reshape_shapesubgraph_opset11,
    reshape_shapesubgraph_opset13,
    reshape_squeezesubgraph_opset13,
    reshape_zeroneg_opset14,
    resize_axes_opset18,
    resize_linearaligncorners_opset11,
    resize_linearpytorch_opset13,
    resize_linearsizes_opset13,
    resize_nearestceilshrink_opset13,
    resize_nearestdefault_opset13,
    resize_nearestfloorasym_opset13,
    resize_scalesonly_opset10,
    sigmoid_basic_opset13,
    slice_axesnosteps_opset11,
    slice_emptyreversed_opset13,
    slice_int32_opset13,
    slice_negative_opset13,
    slice_noaxes_opset13,
    slice_reverse_opset13,
    split_attr_opset11,
    split_attrequal_opset11,
    split_equal_opset13,
    split_input_opset13,
    split_inputnegaxis_opset13,
    split_numoutputs_opset18,
    split_numoutputsuneven_opset18,
    sub_constfirst_opset14,
    sub_rank5_opset13,
    sum_threeinputs_opset13,
    tanh_basic_opset13,
    tile_computed_opset13,
    transpose_default_opset13,
    transpose_nhwc_opset13,
    upsample_linearinput_opset9,
    upsample_nearestattr_opset7,
);

/// `stretch convert` on a model with an operator the importer does not know
/// exits non-zero, writes nothing, and prints one `error:` line naming the
/// operator type, the node and the model's opset.
#[test]
fn unsupported_operators_fail_with_one_line() {
    let cases = [("unsupported_lstm_opset14", "LSTM", "encoder", 14)];
    let unsupported: Vec<String> = op_models()
        .into_iter()
        .filter(|s| s.starts_with("unsupported_"))
        .collect();
    let listed: Vec<&str> = cases.iter().map(|c| c.0).collect();
    assert_eq!(
        unsupported, listed,
        "unsupported_* models and the cases here differ (both sorted)"
    );
    let dir = scratch("op-unsupported");
    for (stem, op_type, node, opset) in cases {
        let out_path = dir.join(format!("{stem}.converted.onnx"));
        let out = stretch(&[
            "convert",
            &op_model(stem).to_string_lossy(),
            "-o",
            &out_path.to_string_lossy(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code().is_some_and(|c| c != 0),
            "{stem}: expected a non-zero exit, got {:?}; stderr: {stderr}",
            out.status
        );
        assert!(!out_path.exists(), "{stem}: an output file was written");
        assert_eq!(stderr.lines().count(), 1, "{stem}: expected one line:\n{stderr}");
        assert!(stderr.starts_with("error: "), "{stem}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stem}: {stderr}");
        for part in [format!("`{op_type}`"), format!("`{node}`"), format!("opset {opset}")] {
            assert!(stderr.contains(&part), "{stem}: `{part}` is not in: {stderr}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The upsampling, 1-D window, Tile, ReduceSum, Expand, Sum and vector
/// MatMul fixtures also run on the subgraph runtime with each engine (tract
/// and onnxruntime), their outputs equal to onnxruntime's run of the fixture (rtol 1e-4).
#[test]
fn newer_operators_run_on_both_engines() {
    let dir = scratch("op-engines");
    let prefixes = [
        "resize_",
        "upsample_",
        "convtranspose_",
        "conv_1d",
        "maxpool_1d",
        "tile_",
        "reducesum_",
        "expand_",
        "sum_",
        "matmul_vectors",
    ];
    let stems: Vec<String> = op_models()
        .into_iter()
        .filter(|s| prefixes.iter().any(|p| s.starts_with(p)))
        .collect();
    assert!(stems.len() >= 20, "{stems:?}");
    let mut list = String::new();
    for (i, stem) in stems.iter().enumerate() {
        let model = op_model(stem);
        let g = graph_ir::onnx::import_file(&model, &Default::default()).expect("import");
        let shape = g.fact(g.inputs()[0].out(0)).expect("input").shape.clone();
        let n: usize = shape.iter().product();
        let x = dir.join(format!("x{i}.npy"));
        let data = (0..n).map(|k| ((k * 7919) % 2000) as f32 / 1000.0 - 1.0).collect();
        scheduler_rt::npy::write(&x, &scheduler_rt::npy::Array { shape, data }).expect("write input");
        for engine in ["tract", "ort"] {
            let y = dir.join(format!("y{i}-{engine}.npy"));
            let spec = format!("cpu0=inline,engine={engine}");
            stretch_ok(&[
                "run",
                &model.to_string_lossy(),
                "--input",
                &x.to_string_lossy(),
                "--output",
                &y.to_string_lossy(),
                "--processor",
                &spec,
            ]);
            list.push_str(&format!("{} {} {}\n", model.display(), x.display(), y.display()));
        }
    }
    let list_file = dir.join("list.txt");
    std::fs::write(&list_file, &list).expect("write list");
    let report = reference(&["expect-list", &list_file.to_string_lossy(), "--rtol", "1e-4"]);
    assert_eq!(report.matches("max abs diff").count(), 2 * stems.len(), "{report}");
}
