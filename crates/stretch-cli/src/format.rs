//! Human-readable numbers and plain-text tables.

/// `1234567` as `1.23 M`, with SI prefixes up to T.
pub fn si(v: u64) -> String {
    let v = v as f64;
    for (scale, unit) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")] {
        if v >= scale {
            return format!("{:.2} {unit}", v / scale);
        }
    }
    format!("{v}")
}

/// Shape as `1x3x224x224`.
pub fn shape(dims: &[usize]) -> String {
    dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
}

/// Renders rows as aligned columns; the first row is the header. Columns
/// after the first `left` are right-aligned.
pub fn table(rows: &[Vec<String>], left: usize) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c < left {
                    format!("{s:<w$}", w = width[c])
                } else {
                    format!("{s:>w$}", w = width[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            out.push_str(&"-".repeat(width.iter().sum::<usize>() + 2 * cols.saturating_sub(1)));
            out.push('\n');
        }
    }
    out
}

/// A feature value without trailing zeros: `3`, `0.25`, `1.2e9`.
pub fn compact(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e7 {
        format!("{v:.0}")
    } else if v.abs() >= 1e7 {
        format!("{v:.3e}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_prefixes() {
        assert_eq!(si(1_814_073_344), "1.81 G");
        assert_eq!(si(999), "999");
        assert_eq!(si(11_689_512), "11.69 M");
    }
}
