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
}
