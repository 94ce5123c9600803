//! Typed access to the model metadata entries several crates share.

use crate::graph::Graph;
use crate::keys;

impl Graph {
    /// The `(processor, precision)` pairs of metadata [`keys::PRECISIONS`]
    /// (`cpu=int8,gpu=fp16`), in the order written; empty when the model
    /// has none (everything computes in fp32). Entries without `=` are skipped.
    pub fn precisions(&self) -> Vec<(String, String)> {
        self.metadata
            .get(keys::PRECISIONS)
            .map(|v| {
                v.split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(p, x)| (p.trim().to_string(), x.trim().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Writes metadata [`keys::PRECISIONS`] from `(processor, precision)`
    /// pairs, in their order; the form [`Graph::precisions`] reads back.
    pub fn set_precisions<P: AsRef<str>, X: AsRef<str>>(&mut self, pairs: impl IntoIterator<Item = (P, X)>) {
        let table: Vec<String> = pairs
            .into_iter()
            .map(|(p, x)| format!("{}={}", p.as_ref(), x.as_ref()))
            .collect();
        self.metadata.insert(keys::PRECISIONS.to_string(), table.join(","));
    }

    /// The input normalisation of metadata [`keys::INPUT_MEAN`] and
    /// [`keys::INPUT_STD`] as `(mean, std)` per channel; `None` when either
    /// is absent or holds a value that is not a number.
    pub fn input_normalisation(&self) -> Option<(Vec<f32>, Vec<f32>)> {
        let read = |k: &str| -> Option<Vec<f32>> {
            self.metadata
                .get(k)?
                .split(',')
                .map(|v| v.trim().parse::<f32>().ok())
                .collect()
        };
        Some((read(keys::INPUT_MEAN)?, read(keys::INPUT_STD)?))
    }

    /// Records the per-channel input normalisation the model was trained
    /// with (the form [`Graph::input_normalisation`] reads back).
    pub fn set_input_normalisation(&mut self, mean: &[f32], std: &[f32]) {
        let join = |v: &[f32]| v.iter().map(f32::to_string).collect::<Vec<_>>().join(",");
        self.metadata.insert(keys::INPUT_MEAN.to_string(), join(mean));
        self.metadata.insert(keys::INPUT_STD.to_string(), join(std));
    }
}

#[cfg(test)]
mod tests {
    use crate::Graph;

    #[test]
    fn the_precision_table_reads_back_what_was_written() {
        let mut g = Graph::new("m");
        assert!(g.precisions().is_empty());
        g.set_precisions([("cpu", "int8"), ("gpu", "fp16")]);
        assert_eq!(g.metadata[crate::keys::PRECISIONS], "cpu=int8,gpu=fp16");
        assert_eq!(
            g.precisions(),
            vec![
                ("cpu".to_string(), "int8".to_string()),
                ("gpu".to_string(), "fp16".to_string())
            ]
        );
        g.metadata
            .insert(crate::keys::PRECISIONS.to_string(), "dsp = int8,junk".to_string());
        assert_eq!(g.precisions(), vec![("dsp".to_string(), "int8".to_string())]);
    }

    #[test]
    fn the_input_normalisation_reads_back_what_was_written() {
        let mut g = Graph::new("m");
        assert_eq!(g.input_normalisation(), None);
        g.set_input_normalisation(&[0.5, 0.25], &[0.125, 2.0]);
        assert_eq!(g.input_normalisation(), Some((vec![0.5, 0.25], vec![0.125, 2.0])));
        g.metadata
            .insert(crate::keys::INPUT_STD.to_string(), "0.1,x".to_string());
        assert_eq!(g.input_normalisation(), None);
    }
}
