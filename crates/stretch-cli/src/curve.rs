//! Learning curves as standalone SVG: loss (train and validation) and
//! validation top-1 per epoch.

use std::fmt::Write as _;

use training::EpochMetrics;

/// One line of a panel: legend label, stroke colour, value per epoch.
type Series<'a> = (&'a str, &'a str, Vec<f64>);

/// One chart: title, top of the y axis, its lines.
type Panel<'a> = (&'a str, f64, Vec<Series<'a>>);

/// A panel's size, the margin left of each, and the space above them (px).
const PANEL_W: f64 = 360.0;
const PANEL_H: f64 = 240.0;
const MARGIN: f64 = 50.0;
const TOP: f64 = 40.0;

/// Two side-by-side line charts of `history`, titled `title`.
pub fn learning_curve_svg(title: &str, history: &[EpochMetrics]) -> String {
    let (pw, ph, margin, top) = (PANEL_W, PANEL_H, MARGIN, TOP);
    let width = 2.0 * (pw + margin) + 30.0;
    let height = top + ph + 60.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let _ = writeln!(
        svg,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">{}</text>"#,
        esc(title)
    );
    let epochs: Vec<f64> = history.iter().map(|m| m.epoch as f64).collect();
    let loss_max = history
        .iter()
        .flat_map(|m| [m.train_loss, m.val_loss])
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-6);
    let panels: [Panel; 2] = [
        (
            "loss",
            loss_max,
            vec![
                ("train", "#1f77b4", history.iter().map(|m| m.train_loss).collect()),
                ("validation", "#d62728", history.iter().map(|m| m.val_loss).collect()),
            ],
        ),
        (
            "validation accuracy (%)",
            100.0,
            vec![
                ("top-1", "#2ca02c", history.iter().map(|m| m.val_top1).collect()),
                ("top-5", "#9467bd", history.iter().map(|m| m.val_top5).collect()),
            ],
        ),
    ];
    let last = epochs.last().copied().unwrap_or(1.0).max(1.0);
    for (p, panel) in panels.iter().enumerate() {
        draw_panel(&mut svg, p, panel, &epochs, last);
    }
    svg.push_str("</svg>\n");
    svg
}

/// Draws panel `p` (its frame, axis labels, lines and legend) of the
/// epochs `epochs` (the last `last`).
fn draw_panel(svg: &mut String, p: usize, panel: &Panel, epochs: &[f64], last: f64) {
    let (pw, ph, margin, top) = (PANEL_W, PANEL_H, MARGIN, TOP);
    let (name, ymax, series) = panel;
    let x0 = margin + p as f64 * (pw + margin + 30.0);
    let y0 = top;
    let _ = writeln!(
        svg,
        r##"<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{name}</text>"#,
        x0 + pw / 2.0,
        y0 - 6.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="end">{ymax:.3}</text>"#,
        x0 - 4.0,
        y0 + 10.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="end">0</text>"#,
        x0 - 4.0,
        y0 + ph
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">epoch</text>"#,
        x0 + pw / 2.0,
        y0 + ph + 34.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="{x0}" y="{}" text-anchor="middle">1</text>"#,
        y0 + ph + 16.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{last}</text>"#,
        x0 + pw,
        y0 + ph + 16.0
    );
    for (k, (label, colour, ys)) in series.iter().enumerate() {
        let pts: Vec<String> = epochs
            .iter()
            .zip(ys)
            .filter(|(_, y)| y.is_finite())
            .map(|(&e, &y)| {
                let x = if last > 1.0 {
                    x0 + pw * (e - 1.0) / (last - 1.0)
                } else {
                    x0 + pw / 2.0
                };
                format!("{x:.1},{:.1}", y0 + ph - ph * (y / ymax).clamp(0.0, 1.0))
            })
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
            pts.join(" ")
        );
        let ly = y0 + 16.0 + 16.0 * k as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{colour}" stroke-width="2"/><text x="{}" y="{}">{label}</text>"#,
            x0 + pw - 110.0,
            ly - 4.0,
            x0 + pw - 90.0,
            ly - 4.0,
            x0 + pw - 84.0,
            ly
        );
    }
}

/// The history as CSV, one row per epoch.
pub fn metrics_csv(history: &[EpochMetrics]) -> String {
    let mut s =
        String::from("epoch,lr,train_loss,train_top1,val_loss,val_top1,val_top5,seconds,images_per_second,kd_loss\n");
    for m in history {
        let _ = writeln!(
            s,
            "{},{:.6},{:.6},{:.3},{:.6},{:.3},{:.3},{:.3},{:.1},{}",
            m.epoch,
            m.lr,
            m.train_loss,
            m.train_top1,
            m.val_loss,
            m.val_top1,
            m.val_top5,
            m.seconds,
            m.images_per_second,
            m.kd_loss.map_or(String::new(), |k| format!("{k:.6}"))
        );
    }
    s
}
