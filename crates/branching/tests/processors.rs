//! The processors a search is asked for: each must exist on the device and be
//! named once, since a processor takes at most one branch of a stage.

mod common;

use branching::plan::Settings;
use branching::search;
use common::resnet;
use predictor::{DeviceModel, DeviceProfile};
use std::collections::HashMap;

fn device() -> DeviceModel {
    let p = |name: &str, gflops: f64| {
        format!(
            "[processors.{name}]\nkind = \"cpu\"\npeak_gflops = {{ value = {gflops}, source = \"t\" }}\nefficiency = {{ value = 1.0, source = \"t\" }}\nbandwidth_gbs = {{ value = 20.0, source = \"t\" }}\nkernel_overhead_us = {{ value = 1.0, source = \"t\" }}\n"
        )
    };
    let text = format!(
        "name = \"t\"\ndescription = \"t\"\n{}{}[[links]]\nbetween = [\"a\", \"b\"]\nlatency_us = {{ value = 5.0, source = \"t\" }}\nbandwidth_gbs = {{ value = 10.0, source = \"t\" }}\n",
        p("a", 10.0),
        p("b", 14.0)
    );
    DeviceModel::analytic(DeviceProfile::parse(&text, "test").expect("profile"))
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_processor_named_twice_is_refused_by_name() {
    let (g, model) = (resnet(), device());
    let settings = Settings {
        alpha: 10.0,
        ..Settings::default()
    };
    for list in [&["a", "a"][..], &["b", "a", "b"][..]] {
        let dup = list[list.len() - 1];
        let result = search(&g, "r", &model, &names(list), &HashMap::new(), &settings, false);
        match result {
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains(&format!("`{dup}`")) && text.contains("more than once"),
                    "{list:?}: {text}"
                );
            }
            Ok((plan, _)) => panic!(
                "{list:?} was planned: {:.2}x, ideal {:.2}x",
                plan.totals.speedup, plan.totals.ideal_speedup
            ),
        }
    }
    let (plan, _) = search(&g, "r", &model, &names(&["a", "b"]), &HashMap::new(), &settings, false).expect("a, b");
    assert!(plan.totals.ideal_speedup > 1.0, "{}", plan.totals.ideal_speedup);
}
