//! Precision is a property of a processor: the phone profiles run the
//! paper's precisions (NN-Stretch §7.2: CPU int8, GPU fp16, DSP int8), a
//! plan prints and records each branch's precision, and pricing a processor
//! at another precision changes its predicted latency and the widths the
//! search picks. Precisions a processor has no rate for are refused.

mod common;

use common::{repo, scratch, stretch, stretch_ok};
use serde_json::Value;

fn device(name: &str) -> String {
    repo()
        .join(format!("configs/devices/{name}.toml"))
        .to_string_lossy()
        .into_owned()
}

fn model(name: &str) -> String {
    repo()
        .join(format!("fixtures/models/{name}.onnx"))
        .to_string_lossy()
        .into_owned()
}

/// `stretch plan` JSON and text for `m` on snapdragon855's CPU and DSP.
fn plan(m: &str, extra: &[&str]) -> (Value, String) {
    let dir = scratch(&format!("precision-{m}-{}", extra.join("").replace([',', '='], "_")));
    let out = dir.join("plan.json");
    let (mo, d, o) = (model(m), device("snapdragon855"), out.to_string_lossy().into_owned());
    let mut args = vec!["plan", &mo, "--device", &d, "--processors", "cpu,dsp", "-o", &o];
    args.extend(extra);
    let text = stretch_ok(&args);
    let v = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    (v, text)
}

fn shapes(p: &Value) -> Vec<String> {
    p["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["branches"].to_string())
        .collect()
}

#[test]
fn a_plan_prints_each_branchs_precision_and_another_precision_changes_the_plan() {
    let (int8, text) = plan("resnet18", &["--explain"]);
    assert_eq!(int8["precisions"]["cpu"], "int8", "{}", int8["precisions"]);
    assert_eq!(int8["precisions"]["dsp"], "int8");
    assert!(text.contains("cpu[int8](d") && text.contains("dsp[int8](d"), "{text}");
    assert!(
        text.contains("precision: cpu runs int8; compute 3.00x and memory traffic 0.25x the figures rated at fp32"),
        "{text}"
    );
    let (fp32, text) = plan("resnet18", &["--precisions", "cpu=fp32"]);
    assert_eq!(fp32["precisions"]["cpu"], "fp32");
    assert!(text.contains("cpu[fp32]"), "{text}");
    let ms = |p: &Value| p["totals"]["original_ms"]["cpu"].as_f64().unwrap();
    assert!(
        ms(&fp32) > 2.0 * ms(&int8),
        "cpu at fp32 {:.2} ms vs int8 {:.2} ms",
        ms(&fp32),
        ms(&int8)
    );
    assert_ne!(
        shapes(&int8),
        shapes(&fp32),
        "the CPU at a third of the speed should get other branch shapes"
    );
}

#[test]
fn precisions_a_processor_has_no_rate_for_are_refused() {
    let (m, d) = (model("resnet18"), device("snapdragon855"));
    let out = stretch(&["plan", &m, "--device", &d, "--precisions", "dsp=fp32"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("processors.dsp.precision = \"fp32\"") && err.contains("it runs int8"),
        "{err}"
    );
    let out = stretch(&["plan", &m, "--device", &d, "--precisions", "cpu=int4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("unknown precision `int4`"), "{err}");

    let dir = scratch("precision-bad-profile");
    let original = std::fs::read_to_string(device("snapdragon855")).unwrap();
    let dsp = "rated_precision = \"int8\"\nprecision = \"int8\"";
    assert!(original.contains(dsp), "the DSP section changed shape");
    let text = original.replacen(dsp, "rated_precision = \"int8\"\nprecision = \"fp16\"", 1);
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, text).unwrap();
    let out = stretch(&["predict", &m, "--device", &bad.to_string_lossy(), "--processor", "cpu"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.toml") && err.contains("processors.dsp.precision = \"fp16\""),
        "{err}"
    );
}

fn total_ms(predict: &str) -> f64 {
    let line = predict
        .lines()
        .find(|l| l.starts_with("predicted total"))
        .unwrap_or_else(|| panic!("no total in:\n{predict}"));
    line.split(": ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// `stretch profile --precision int8` times kernels rewritten as `stretch
/// quantize` writes them; fitted, they price a processor running int8
/// (`regressors_at.int8`) in place of its fp32 regressors scaled by the
/// analytic ratio. Resuming such a DIR at fp32, and regressors named for a
/// precision they were not profiled at, are refused.
#[test]
fn kernels_profiled_at_int8_price_a_processor_running_int8() {
    let dir = scratch("precision-profile");
    let profile = |p: &str| {
        let out = dir.join(p).to_string_lossy().into_owned();
        let classes = "conv+bn+act,pool";
        stretch_ok(&[
            "profile",
            "--quick",
            "--precision",
            p,
            "--classes",
            classes,
            "--out",
            &out,
        ]);
        out
    };
    let (fp32, int8) = (profile("fp32"), profile("int8"));
    let csv = std::fs::read_to_string(format!("{int8}/kernels.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert!(rows.len() >= 8, "{csv}");
    assert!(rows.iter().all(|r| r.contains(",tract/int8,")), "{csv}");
    assert!(
        rows.iter()
            .all(|r| r.starts_with("conv+bn+act,") || r.starts_with("pool,")),
        "{csv}"
    );
    let out = stretch(&["profile", "--quick", "--classes", "conv+bn+act,pool", "--out", &int8]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("`tract/int8`, this run uses `tract`"),
        "{err}"
    );
    stretch_ok(&["fit", &fp32]);
    let fitted = stretch_ok(&["fit", &int8]);
    assert!(
        fitted.contains(&format!("regressors_at.int8 = \"{int8}/regressors.json\"")),
        "{fitted}"
    );

    let section = |at: &str| {
        format!(
            "name = \"t\"\ndescription = \"two regressors\"\n[processors.cpu0]\nkind = \"cpu\"\n\
             peak_gflops = {{ value = 18.9, source = \"test\" }}\nefficiency = {{ value = 1.0, source = \"test\" }}\n\
             bandwidth_gbs = {{ value = 23.8, source = \"test\" }}\nkernel_overhead_us = {{ value = 2.0, source = \"test\" }}\n\
             regressors = \"{fp32}/regressors.json\"\nspeedup.int8 = {{ value = 0.5, source = \"test\" }}\n{at}"
        )
    };
    let predict = |name: &str, at: &str| {
        let path = dir.join(name);
        std::fs::write(&path, section(at)).unwrap();
        let p = path.to_string_lossy().into_owned();
        stretch(&[
            "predict",
            &model("resnet18"),
            "--device",
            &p,
            "--processor",
            "cpu0",
            "--precision",
            "int8",
        ])
    };
    let ok = |o: std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let scaled = ok(predict("scaled.toml", ""));
    assert!(
        scaled.contains("x analytic int8 ratio") && !scaled.contains(&int8),
        "{scaled}"
    );
    let measured = ok(predict(
        "measured.toml",
        &format!("regressors_at.int8 = \"{int8}/regressors.json\""),
    ));
    let pool = measured.lines().find(|l| l.starts_with("/maxpool/")).unwrap();
    assert!(pool.ends_with(&format!("regressor {int8}/regressors.json")), "{pool}");
    assert!(!measured.contains("analytic int8 ratio"), "{measured}");
    assert_ne!(total_ms(&scaled), total_ms(&measured));

    let wrong = predict(
        "wrong.toml",
        &format!("regressors_at.int8 = \"{fp32}/regressors.json\""),
    );
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success(), "{err}");
    assert!(
        err.contains("fitted on kernels run at fp32 (engine `tract`), named for int8"),
        "{err}"
    );
    let rated = predict(
        "rated.toml",
        &format!("regressors_at.fp32 = \"{fp32}/regressors.json\""),
    );
    let err = String::from_utf8_lossy(&rated.stderr);
    assert!(
        !rated.status.success() && err.contains("regressors_at.fp32: fp32 is the rated precision"),
        "{err}"
    );
}
