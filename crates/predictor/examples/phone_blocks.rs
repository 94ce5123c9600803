//! Trains a block-level latency predictor for each phone table in the
//! repository's `data/phone-latency/` (`predictor::phone::TABLES_DIR`), prints
//! its accuracy on the held-out 20% (fixed seeds, see `predictor::phone`) and
//! saves the fitted forest to `data/predictors/<phone>_blocks.forest.json`
//! with its provenance.
//!
//! usage: phone_blocks [--data DIR] [--out DIR] [--no-save]
//!                     [--trees N] [--depth N] [--leaf N] [--max-features N]
//!                     [--split-seed N] [--fit-seed N]

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

use predictor::forest::MaxFeatures;
use predictor::phone::{self, FIT_SEED, PHONE_TABLES, SPLIT_SEED, TABLES_DIR, TEST_FRACTION};

fn main() -> Result<(), Box<dyn Error>> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .ancestors()
        .nth(2)
        .ok_or("crate is not two levels below the repository root")?;
    let mut data = root.join(TABLES_DIR);
    let mut out = root.join("data/predictors");
    let mut save = true;
    let mut params = phone::block_forest_params();
    let (mut split_seed, mut fit_seed) = (SPLIT_SEED, FIT_SEED);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--no-save" {
            save = false;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        let number = || value.parse::<usize>().map_err(|e| format!("{arg} {value}: {e}"));
        let seed = || value.parse::<u64>().map_err(|e| format!("{arg} {value}: {e}"));
        match arg.as_str() {
            "--data" => data = PathBuf::from(&value),
            "--out" => out = PathBuf::from(&value),
            "--trees" => params.n_trees = number()?,
            "--depth" => params.max_depth = number()?,
            "--leaf" => params.min_samples_leaf = number()?,
            "--max-features" => params.max_features = MaxFeatures::Count(number()?),
            "--split-seed" => split_seed = seed()?,
            "--fit-seed" => fit_seed = seed()?,
            _ => return Err(format!("unknown argument {arg}").into()),
        }
    }
    println!("forest: {params:?}");
    println!(
        "split: {:.0}% held out, split seed {split_seed}, fit seed {fit_seed}",
        100.0 * TEST_FRACTION
    );
    for (phone_name, file) in PHONE_TABLES {
        let blocks = phone::load_blocks(data.join(file))?;
        let start = Instant::now();
        let (mut forest, report) = phone::train_and_evaluate(&blocks, &params, split_seed, fit_seed)?;
        let fit_s = start.elapsed().as_secs_f64();
        println!(
            "{phone_name}: {} MBConv blocks (other keys ignored: {:?})",
            blocks.samples.len(),
            blocks.other_keys
        );
        println!(
            "{phone_name}: {report} [fit+eval {fit_s:.2} s, {} nodes]",
            forest.n_nodes()
        );
        if save {
            forest.set_metadata("data", format!("{TABLES_DIR}/{file}").into());
            forest.set_metadata("data_source", "microsoft/nn-Meter dev/hybrid-transformer, MIT".into());
            forest.set_metadata("n_blocks", blocks.samples.len().into());
            forest.set_metadata("split_seed", split_seed.into());
            forest.set_metadata("fit_seed", fit_seed.into());
            forest.set_metadata("test_fraction", TEST_FRACTION.into());
            forest.set_metadata("heldout", serde_json::to_value(&report)?);
            std::fs::create_dir_all(&out)?;
            let path = out.join(format!("{phone_name}_blocks.forest.json"));
            forest.save(&path)?;
            println!(
                "{phone_name}: saved {} ({} bytes)",
                path.display(),
                std::fs::metadata(&path)?.len()
            );
        }
    }
    Ok(())
}
