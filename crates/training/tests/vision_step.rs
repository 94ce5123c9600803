//! One training step on each vision fixture (segmentation, style transfer,
//! YOLO-style detection; `fixtures/vision`) and on each of its outputs: the
//! lowering takes every op they use (ConvTranspose, Resize, InstanceNorm,
//! LeakyReLU, HardSwish), the loss and every gradient are finite, and a
//! plain gradient step changes the output without making it non-finite.

use burn::tensor::{Tensor, TensorData};
use graph_ir::onnx::{ImportOptions, import_file};
use training::{Backend, Params, Role, host_vec, lower};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/vision")
        .join(name)
}

fn finite(v: &[f32]) -> bool {
    v.iter().all(|x| x.is_finite())
}

#[test]
fn every_vision_fixture_trains_one_step_per_output() {
    let names = [
        "lraspp_mobilenet_v3_large.onnx",
        "deeplabv3_mobilenet_v3_large.onnx",
        "fcn_resnet50.onnx",
        "style_transfer.onnx",
        "yolo_tiny.onnx",
    ];
    let device = Backend::Flex.device().autodiff();
    let mut steps = 0;
    for name in names {
        let options = ImportOptions {
            random_weights: Some(5),
            ..ImportOptions::default()
        };
        let full = import_file(fixture(name), &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (out_name, out) in full.outputs().to_vec() {
            let mut g = full.clone();
            g.set_outputs(vec![(out_name.clone(), out)]).expect("one output");
            g.prune_dead();
            let what = format!("{name} output `{out_name}`");
            let program = lower(&g).unwrap_or_else(|e| panic!("{what}: {e}"));
            let [c, h, w] = program.input_shape();
            let x: Vec<f32> = (0..c * h * w)
                .map(|k| ((k * 7919) % 2000) as f32 / 1000.0 - 1.0)
                .collect();
            let input = || Tensor::<4>::from_data(TensorData::new(x.clone(), [1, c, h, w]), &device);
            let params = Params::from_graph(&program, &g, &device).expect("params");
            let before = program.forward(&params.values, input(), true).logits;
            let loss = before.clone().powf_scalar(2.0).mean();
            assert!(
                finite(&host_vec(&loss.clone().reshape([1]))),
                "{what}: loss is not finite"
            );
            let grads = loss.backward();
            let mut stepped = params.to_host();
            let mut learnable = 0;
            for (i, spec) in program.params().iter().enumerate() {
                if spec.role != Role::Learnable {
                    continue;
                }
                let grad = host_vec(
                    &params.values[i]
                        .grad(&grads)
                        .unwrap_or_else(|| panic!("{what}: no gradient for {}", spec.name)),
                );
                assert!(finite(&grad), "{what}: gradient of {} is not finite", spec.name);
                for (p, g) in stepped[i].iter_mut().zip(&grad) {
                    *p -= 0.01 * g;
                }
                learnable += 1;
            }
            assert!(learnable > 0, "{what}: nothing to learn");
            let after = Params::from_host(&program, stepped, &device);
            let y0 = host_vec(&before.reshape([-1]));
            let y1 = host_vec(&program.forward(&after.values, input(), true).logits.reshape([-1]));
            assert!(finite(&y1), "{what}: output after one step is not finite");
            assert!(y0 != y1, "{what}: one step did not change the output");
            steps += 1;
        }
    }
    assert_eq!(steps, 8, "five fixtures with eight outputs in all");
}
