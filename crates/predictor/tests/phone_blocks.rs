//! Block predictors on the real phone tables: the held-out accuracy target
//! (±10% for at least 95% of the held-out 20%) and the committed forests in
//! `data/predictors/` reproducing the accuracy recorded in them.
//!
//! Reads the tables committed in the repository (`data/phone-latency/`).

use std::path::PathBuf;

use predictor::forest::Forest;
use predictor::phone::{self, AccuracyReport, FIT_SEED, SPLIT_SEED, TEST_FRACTION};

/// Fraction of held-out blocks that must be predicted within ±10%.
const TARGET_WITHIN_10: f64 = 0.95;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check_phone(phone_name: &str, table: &str) {
    let data = repo().join(phone::TABLES_DIR).join(table);
    assert!(
        data.is_file(),
        "{} is missing: the phone tables are committed in the repository",
        data.display()
    );
    let blocks = phone::load_blocks(&data).unwrap();
    assert!(
        blocks.samples.len() > 1700,
        "{phone_name}: only {} MBConv blocks",
        blocks.samples.len()
    );

    let (train, test) = phone::split_train_test(&blocks.samples, TEST_FRACTION, SPLIT_SEED).unwrap();
    let fresh = phone::fit_blocks(&train, &phone::block_forest_params(), FIT_SEED).unwrap();
    let report = phone::evaluate(&fresh, &test, train.len()).unwrap();
    assert_eq!((report.n_train, report.n_test), (1430, 358), "{phone_name}");
    assert!(report.within_10 >= TARGET_WITHIN_10, "{phone_name}: {report}");

    let saved = repo().join(format!("data/predictors/{phone_name}_blocks.forest.json"));
    let committed = Forest::load(&saved).unwrap();
    phone::check_block_forest(&committed).unwrap();
    let meta = committed.metadata();
    assert_eq!(
        meta["split_seed"], SPLIT_SEED,
        "{phone_name}: committed forest used another split"
    );
    assert_eq!(meta["fit_seed"], FIT_SEED);
    assert_eq!(meta["test_fraction"], TEST_FRACTION);
    assert_eq!(
        committed.params(),
        fresh.params(),
        "{phone_name}: committed forest is stale; rerun scripts/benchmarks/phone_blocks.sh"
    );
    let recorded: AccuracyReport = serde_json::from_value(meta["heldout"].clone()).unwrap();
    let reloaded = phone::evaluate(&committed, &test, train.len()).unwrap();
    for (name, got, want) in [
        ("within_5", reloaded.within_5, recorded.within_5),
        ("within_10", reloaded.within_10, recorded.within_10),
        ("within_15", reloaded.within_15, recorded.within_15),
        ("fresh within_10", report.within_10, recorded.within_10),
    ] {
        assert_eq!(
            got, want,
            "{phone_name}: {name} of the committed forest differs from the recorded one"
        );
    }
    for (got, want) in [
        (reloaded.rmse_ms, recorded.rmse_ms),
        (reloaded.rmspe_pct, recorded.rmspe_pct),
    ] {
        assert!(
            (got - want).abs() <= 1e-9 * want,
            "{phone_name}: {reloaded} vs recorded {recorded}"
        );
    }
    for sample in &test {
        let a = phone::predict_block(&committed, &sample.block).unwrap();
        let b = phone::predict_block(&fresh, &sample.block).unwrap();
        assert!(
            (a - b).abs() <= 1e-12 * b,
            "{phone_name}: {} predicted {a} (committed) vs {b} (fresh)",
            sample.key
        );
    }
}

fn table_of(phone_name: &str) -> &'static str {
    phone::PHONE_TABLES
        .iter()
        .find(|(name, _)| *name == phone_name)
        .map(|(_, table)| *table)
        .unwrap()
}

#[test]
fn pixel4_blocks_within_10_percent() {
    check_phone("pixel4", table_of("pixel4"));
}

#[test]
fn xiaomi11_blocks_within_10_percent() {
    check_phone("xiaomi11", table_of("xiaomi11"));
}
