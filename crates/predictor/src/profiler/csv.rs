//! The kernels CSV: one row per measured configuration, appended and flushed
//! as soon as it is measured, so an interrupted run loses nothing.
//!
//! Columns ([`COLUMNS`]): `class` (the fusion chain, e.g. `conv+bn+act`),
//! `round` (0 for the initial samples, r for adaptive round r), `origin`
//! (`cnn`, `random` or `adaptive`), the feature columns `h, cin, cout, k, s,
//! n, c1, c2, c3, c4, fusable, params` (a class fills those that
//! [`crate::features::feature_names`] lists for it, others are empty), `flops`
//! and `bytes` (the kernel's work, [`crate::features::work`]; `flops` is also
//! a feature of conv, dwconv and fc), `median_ms, p10_ms, p90_ms` over `reps`
//! timed runs, and the `engine`, its `threads` and the `cores` the run was
//! pinned to (a cpulist, quoted when it holds a comma).

use super::error::ProfilerError;
use super::space::{KernelKind, Origin};
use crate::features::feature_names;
use engine::host::CoreSet;
use std::path::Path;

/// The header row, in order.
pub const COLUMNS: [&str; 24] = [
    "class",
    "round",
    "origin",
    "h",
    "cin",
    "cout",
    "k",
    "s",
    "n",
    "c1",
    "c2",
    "c3",
    "c4",
    "fusable",
    "params",
    "flops",
    "bytes",
    "median_ms",
    "p10_ms",
    "p90_ms",
    "reps",
    "engine",
    "threads",
    "cores",
];

/// One measured kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub kind: KernelKind,
    pub round: u32,
    pub origin: Origin,
    /// Named by [`feature_names`] of `kind.op_class()`.
    pub features: Vec<f64>,
    pub flops: u64,
    pub bytes: u64,
    pub median_ms: f64,
    pub p10_ms: f64,
    pub p90_ms: f64,
    pub reps: usize,
    pub engine: String,
    pub threads: usize,
    pub cores: CoreSet,
}

/// The identity of a configuration: its class and feature values.
pub fn key(kind: KernelKind, features: &[f64]) -> String {
    let values: Vec<String> = features.iter().map(|v| v.to_string()).collect();
    format!("{kind}:{}", values.join(","))
}

fn column(name: &str) -> Option<usize> {
    COLUMNS.iter().position(|c| *c == name)
}

impl Row {
    /// The time `stat` summarises this row's runs by.
    pub fn ms(&self, stat: super::timing::Statistic) -> f64 {
        stat.pick(self.median_ms, self.p10_ms)
    }

    /// See [`key`].
    pub fn key(&self) -> String {
        key(self.kind, &self.features)
    }

    /// The CSV line (no newline). Times are written to the nanosecond.
    pub fn to_line(&self) -> String {
        let mut cells = vec![String::new(); COLUMNS.len()];
        let mut set = |name: &str, v: String| {
            if let Some(i) = column(name) {
                cells[i] = v;
            }
        };
        set("class", self.kind.name().into());
        set("round", self.round.to_string());
        set("origin", self.origin.name().into());
        for (name, v) in feature_names(self.kind.op_class()).iter().zip(&self.features) {
            set(name, v.to_string());
        }
        set("flops", self.flops.to_string());
        set("bytes", self.bytes.to_string());
        set("median_ms", format!("{:.6}", self.median_ms));
        set("p10_ms", format!("{:.6}", self.p10_ms));
        set("p90_ms", format!("{:.6}", self.p90_ms));
        set("reps", self.reps.to_string());
        set("engine", self.engine.clone());
        set("threads", self.threads.to_string());
        let cores = self.cores.to_string();
        set(
            "cores",
            if cores.contains(',') {
                format!("\"{cores}\"")
            } else {
                cores
            },
        );
        cells.join(",")
    }

    /// Parses a line written by [`Row::to_line`]; the error says which cell is wrong.
    pub fn parse(line: &str) -> Result<Row, String> {
        let cells = Cells(split(line)?);
        if cells.0.len() != COLUMNS.len() {
            return Err(format!("{} cells, the header has {}", cells.0.len(), COLUMNS.len()));
        }
        let kind = KernelKind::from_name(cells.get("class"))
            .ok_or_else(|| format!("unknown class `{}`", cells.get("class")))?;
        let origin = Origin::from_name(cells.get("origin"))
            .ok_or_else(|| format!("unknown origin `{}`", cells.get("origin")))?;
        let features = feature_names(kind.op_class())
            .iter()
            .map(|name| cells.finite(name))
            .collect::<Result<Vec<_>, _>>()?;
        let time = |name: &str| {
            cells.finite(name).and_then(|v| {
                if v >= 0.0 {
                    Ok(v)
                } else {
                    Err(format!("{name} is negative"))
                }
            })
        };
        let cores = cells.get("cores");
        Ok(Row {
            kind,
            round: cells.num("round")?,
            origin,
            features,
            flops: cells.num("flops")?,
            bytes: cells.num("bytes")?,
            median_ms: time("median_ms")?,
            p10_ms: time("p10_ms")?,
            p90_ms: time("p90_ms")?,
            reps: cells.num("reps")?,
            engine: cells.get("engine").to_string(),
            threads: cells.num("threads")?,
            cores: cores.parse().map_err(|_| format!("cores `{cores}` is not a cpulist"))?,
        })
    }
}

/// The cells of one line, addressed by column name.
struct Cells(Vec<String>);

impl Cells {
    fn get(&self, name: &str) -> &str {
        column(name).and_then(|i| self.0.get(i)).map_or("", String::as_str)
    }

    fn num<T: std::str::FromStr>(&self, name: &str) -> Result<T, String> {
        let v = self.get(name);
        v.parse().map_err(|_| format!("{name} `{v}` is not a valid number"))
    }

    fn finite(&self, name: &str) -> Result<f64, String> {
        let v: f64 = self.num(name)?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("{name} is {v}"))
        }
    }
}

/// Splits a CSV line into cells; a cell may be quoted (`"0,2"`, `""` for a quote).
fn split(line: &str) -> Result<Vec<String>, String> {
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(ch) = chars.next() {
        match (quoted, ch) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if cur.is_empty() => quoted = true,
            (false, ',') => cells.push(std::mem::take(&mut cur)),
            (_, ch) => cur.push(ch),
        }
    }
    if quoted {
        return Err("unterminated quoted cell".into());
    }
    cells.push(cur);
    Ok(cells)
}

/// The rows already in a kernels CSV, each with its 1-based line number.
#[derive(Debug, Default)]
pub struct Existing {
    pub rows: Vec<(usize, Row)>,
    /// Line number of a last line that was cut off mid-write and dropped.
    pub torn_line: Option<usize>,
}

/// Reads the rows of a kernels CSV without opening it for writing; a torn
/// last line is skipped and reported as in [`Store::open`].
pub fn read(path: &Path) -> Result<Existing, ProfilerError> {
    let text = std::fs::read_to_string(path).map_err(|error| ProfilerError::Io {
        action: "read",
        path: path.to_path_buf(),
        error,
    })?;
    Ok(parse_rows(path, &text)?.0)
}

/// The rows of `text` and the byte length to keep (short of a torn last line).
fn parse_rows(path: &Path, text: &str) -> Result<(Existing, usize), ProfilerError> {
    let header = COLUMNS.join(",");
    let mut existing = Existing::default();
    let mut keep = text.len();
    let mut lines = text.split_inclusive('\n').enumerate().peekable();
    if let Some((_, first)) = lines.next() {
        let found = first.trim_end_matches(['\r', '\n']);
        if found != header {
            return Err(ProfilerError::Header {
                path: path.to_path_buf(),
                found: found.to_string(),
                expected: header,
            });
        }
    }
    let mut offset = text.split_inclusive('\n').next().map_or(0, str::len);
    while let Some((i, raw)) = lines.next() {
        let line = raw.trim_end_matches(['\r', '\n']);
        let number = i + 1;
        if !line.trim().is_empty() {
            match Row::parse(line) {
                Ok(row) => existing.rows.push((number, row)),
                Err(_) if lines.peek().is_none() && !raw.ends_with('\n') => {
                    existing.torn_line = Some(number);
                    keep = offset;
                }
                Err(reason) => {
                    return Err(ProfilerError::MalformedRow {
                        path: path.to_path_buf(),
                        line: number,
                        reason,
                    });
                }
            }
        }
        offset += raw.len();
    }
    Ok((existing, keep))
}

/// A kernels CSV opened for appending.
pub struct Store {
    path: std::path::PathBuf,
    file: std::fs::File,
}

impl Store {
    /// Opens `path`, creating it with the header row when missing or empty,
    /// and reads the rows it already holds.
    ///
    /// A last line without its newline that does not parse is the trace of an
    /// interrupted write: it is removed from the file and reported in
    /// [`Existing::torn_line`]. Any other unparsable row is an error naming
    /// its line; a different header is an error too.
    pub fn open(path: &Path) -> Result<(Store, Existing), ProfilerError> {
        let io = |action| {
            move |error| ProfilerError::Io {
                action,
                path: path.to_path_buf(),
                error,
            }
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io("read")(e)),
        };
        let (existing, keep) = parse_rows(path, &text)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io("open"))?;
        if keep < text.len() {
            file.set_len(keep as u64).map_err(io("truncate"))?;
        }
        let mut store = Store {
            path: path.to_path_buf(),
            file,
        };
        if text.is_empty() {
            store.write(&format!("{}\n", COLUMNS.join(",")))?;
        } else if keep == text.len() && !text.ends_with('\n') {
            store.write("\n")?;
        }
        Ok((store, existing))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `row` and flushes it to the file.
    pub fn append(&mut self, row: &Row) -> Result<(), ProfilerError> {
        self.write(&format!("{}\n", row.to_line()))
    }

    fn write(&mut self, s: &str) -> Result<(), ProfilerError> {
        use std::io::Write;
        self.file
            .write_all(s.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|error| ProfilerError::Io {
                action: "append to",
                path: self.path.clone(),
                error,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiler::space::KernelKind;

    pub(crate) fn row(kind: KernelKind, features: Vec<f64>) -> Row {
        Row {
            kind,
            round: 1,
            origin: Origin::Adaptive,
            features,
            flops: 1234,
            bytes: 5678,
            median_ms: 0.125,
            p10_ms: 0.1,
            p90_ms: 0.25,
            reps: 20,
            engine: "tract".into(),
            threads: 2,
            cores: "0,2".parse().unwrap(),
        }
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("stretch-csv-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("kernels.csv")
    }

    /// The feature columns, a superset of every profiled class's feature names.
    const FEATURE_COLUMNS: std::ops::Range<usize> = 3..16;

    #[test]
    fn every_profiled_class_fits_the_feature_columns() {
        for kind in KernelKind::ALL {
            for name in feature_names(kind.op_class()) {
                let i = column(name).unwrap_or(usize::MAX);
                assert!(FEATURE_COLUMNS.contains(&i), "{kind}: {name}");
            }
        }
    }

    #[test]
    fn rows_round_trip_through_a_line() {
        let rows = [
            row(
                KernelKind::ConvBnRelu,
                vec![56.0, 64.0, 128.0, 3.0, 2.0, 1234.0, 73728.0],
            ),
            row(KernelKind::Concat, vec![14.0, 3.0, 32.0, 64.0, 16.0, 0.0]),
            row(KernelKind::Fc, vec![512.0, 1000.0, 1234.0]),
        ];
        for r in rows {
            let line = r.to_line();
            assert!(line.ends_with(",\"0,2\""), "{line}");
            assert_eq!(Row::parse(&line).unwrap(), r);
        }
    }

    #[test]
    fn parse_names_the_bad_cell() {
        let line = row(KernelKind::Act, vec![7.0, 512.0])
            .to_line()
            .replace("0.125000", "fast");
        assert!(Row::parse(&line).unwrap_err().contains("median_ms `fast`"));
        let line = row(KernelKind::Act, vec![7.0, 512.0])
            .to_line()
            .replacen("act", "softmax", 1);
        assert!(Row::parse(&line).unwrap_err().contains("softmax"));
        assert!(Row::parse("act,1").unwrap_err().contains("2 cells"));
    }

    #[test]
    fn reopening_keeps_rows_and_appends_after_them() {
        let path = scratch("reopen");
        let a = row(KernelKind::Act, vec![7.0, 512.0]);
        let b = row(KernelKind::Gap, vec![7.0, 1024.0]);
        let (mut store, existing) = Store::open(&path).unwrap();
        assert!(existing.rows.is_empty());
        store.append(&a).unwrap();
        drop(store);
        let (mut store, existing) = Store::open(&path).unwrap();
        assert_eq!(existing.rows, vec![(2, a.clone())]);
        store.append(&b).unwrap();
        let (_, existing) = Store::open(&path).unwrap();
        assert_eq!(existing.rows, vec![(2, a), (3, b)]);
    }

    #[test]
    fn malformed_row_names_its_line() {
        let path = scratch("malformed");
        let good = row(KernelKind::Act, vec![7.0, 512.0]).to_line();
        let text = format!(
            "{}\n{good}\n{}\n{good}\n",
            COLUMNS.join(","),
            good.replace("tract,", "tract,x")
        );
        std::fs::write(&path, text).unwrap();
        let e = Store::open(&path).err().unwrap().to_string();
        assert!(e.contains("kernels.csv:3: malformed row: threads `x2`"), "{e}");
    }

    #[test]
    fn torn_last_line_is_dropped_and_other_headers_rejected() {
        let path = scratch("torn");
        let good = row(KernelKind::Act, vec![7.0, 512.0]).to_line();
        let header = COLUMNS.join(",");
        std::fs::write(&path, format!("{header}\n{good}\n{}", &good[..10])).unwrap();
        let (mut store, existing) = Store::open(&path).unwrap();
        assert_eq!((existing.rows.len(), existing.torn_line), (1, Some(3)));
        store.append(&row(KernelKind::Gap, vec![7.0, 8.0])).unwrap();
        let (_, existing) = Store::open(&path).unwrap();
        assert_eq!(existing.rows.len(), 2);
        assert_eq!(existing.torn_line, None);

        std::fs::write(&path, "class,h\n").unwrap();
        let e = Store::open(&path).err().unwrap().to_string();
        assert!(e.contains("header is `class,h`"), "{e}");
    }
}
