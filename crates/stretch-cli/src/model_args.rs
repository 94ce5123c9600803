//! Options shared by every command that reads a model.

use anyhow::{Result, bail};
use clap::Args;
use graph_ir::Graph;
use graph_ir::onnx::{ImportOptions, InputShape, import_file};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// ONNX model to read.
    pub model: PathBuf,

    /// Shape of a graph input, as `1,3,224,224` (first input) or
    /// `NAME:1,3,224,224`; repeat for several inputs. Without it, a dynamic
    /// batch dimension is fixed to 1 and other dynamic dimensions are an error.
    #[arg(long = "input-shape", value_name = "[NAME:]DIMS")]
    pub input_shape: Vec<InputShape>,

    /// Fill weights that have no data (structure-only models) with
    /// deterministic pseudo-random values drawn from SEED.
    #[arg(long = "random-weights", value_name = "SEED")]
    pub random_weights: Option<u64>,
}

impl ModelArgs {
    /// Imports the model, with the file name in any error.
    pub fn load(&self) -> Result<Graph> {
        let options = ImportOptions {
            input_shapes: self.input_shape.clone(),
            random_weights: self.random_weights,
        };
        let path = self.model.display().to_string();
        import_file(&self.model, &options).map_err(|e| {
            if e.to_string().contains(&path) {
                anyhow::Error::new(e)
            } else {
                anyhow::Error::new(e).context(format!("cannot import {path}"))
            }
        })
    }

    /// [`ModelArgs::load`] for commands that compute with the weights: a
    /// weight without data (a structure-only model) is an error naming the
    /// first one, unless --random-weights filled them.
    pub fn load_runnable(&self) -> Result<Graph> {
        let graph = self.load()?;
        if let Some(what) = structure_only(&graph) {
            bail!(
                "{}: {what}: pass --random-weights SEED to run it with seeded values",
                self.model.display()
            );
        }
        Ok(graph)
    }
}

/// `None` when every weight of `graph` has data; else how many lack it
/// and the first, as a message that the caller completes with its remedy.
pub fn structure_only(graph: &Graph) -> Option<String> {
    let empty = graph.weights_without_data();
    let first = &graph.node(*empty.first()?).name;
    Some(format!(
        "{} weights have no data (a structure-only model; the first is `{first}`)",
        empty.len()
    ))
}
