//! A horizontal bar chart as standalone SVG (no fonts or libraries needed).

use std::fmt::Write as _;

/// Draws `bars` (label, value) as an SVG bar chart titled `title`; values
/// are printed beside their bars with `unit`.
pub fn bars_svg(title: &str, bars: &[(String, f64)], unit: &str) -> String {
    let (row, label_w, bar_w, top) = (28.0, 150.0, 420.0, 48.0);
    let max = bars.iter().map(|b| b.1).fold(0.0f64, f64::max).max(1e-12);
    let height = top + row * bars.len() as f64 + 20.0;
    let width = label_w + bar_w + 110.0;
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="10" y="24" font-size="15" font-weight="bold">{}</text>"#,
        esc(title)
    );
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = top + row * i as f64;
        let w = bar_w * v / max;
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            label_w - 8.0,
            y + 17.0,
            esc(label)
        );
        let _ = writeln!(
            svg,
            r##"<rect x="{label_w}" y="{}" width="{w:.1}" height="{}" fill="#4878a8"/>"##,
            y + 4.0,
            row - 8.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}">{v:.2}{unit}</text>"#,
            label_w + w + 6.0,
            y + 17.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_largest_and_labels_are_escaped() {
        let svg = bars_svg("a<b", &[("x".into(), 2.0), ("y&z".into(), 1.0)], "x");
        assert!(svg.contains("a&lt;b") && svg.contains("y&amp;z"));
        assert!(svg.contains(r#"width="420.0""#) && svg.contains(r#"width="210.0""#));
        assert!(svg.contains("2.00x"));
    }
}
