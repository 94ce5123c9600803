//! Gantt chart (PNG) of one traced run: a row per processor, a bar per
//! subgraph run named after it, grey bars where a processor waits at a
//! meeting point, red markers where the adaptation policy moved a subgraph.

use anyhow::{Context, Result, anyhow};
use plotters::prelude::*;
use plotters::style::FontStyle;
use scheduler_rt::Trace;
use std::path::Path;
use std::sync::OnceLock;

/// DejaVu Sans (assets/fonts, licence beside it), so text renders the same
/// on every machine without system fonts.
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
pub(crate) const FAMILY: &str = "dejavu-sans";

pub(crate) fn register() -> Result<()> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the bundled font assets/fonts/DejaVuSans.ttf cannot be read"))
    }
}

pub(crate) const PALETTE: [RGBColor; 6] = [
    RGBColor(72, 120, 168),
    RGBColor(221, 132, 82),
    RGBColor(85, 168, 104),
    RGBColor(129, 114, 179),
    RGBColor(147, 120, 96),
    RGBColor(218, 139, 195),
];

/// Draws `trace` with one row per entry of `processors` (in that order) and
/// writes it to `path` as PNG.
pub fn write_png(path: &Path, title: &str, processors: &[String], trace: &Trace) -> Result<()> {
    register()?;
    let rows = processors.len().max(1);
    let (width, height) = (1200u32, 110 + 70 * rows as u32);
    let end_ms = trace
        .spans
        .iter()
        .map(|s| s.end_s * 1e3)
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.02;
    let row_of = |p: &str| processors.iter().position(|q| q == p).unwrap_or(0) as f64;
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FAMILY, 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..end_ms, 0.0..rows as f64)?;
        let names = processors.to_vec();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows * 2 + 1)
            .y_label_formatter(&move |y| {
                let i = (y - 0.5).round();
                if (y - 0.5 - i).abs() < 1e-6 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("ms since the request started (measured)")
            .label_style((FAMILY, 13))
            .draw()?;
        for (p, from, to) in trace.meeting_waits() {
            let y = row_of(&p);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(from * 1e3, y + 0.3), (to * 1e3, y + 0.7)],
                RGBColor(200, 200, 200).filled(),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                "wait",
                (from * 1e3, y + 0.78),
                (FAMILY, 11).into_font().color(&RGBColor(90, 90, 90)),
            )))?;
        }
        for (i, s) in trace.spans.iter().enumerate() {
            let y = row_of(&s.processor);
            let color = PALETTE[i % PALETTE.len()];
            chart.draw_series(std::iter::once(Rectangle::new(
                [(s.start_s * 1e3, y + 0.15), (s.end_s * 1e3, y + 0.85)],
                color.filled(),
            )))?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(s.start_s * 1e3, y + 0.15), (s.end_s * 1e3, y + 0.85)],
                BLACK.stroke_width(1),
            )))?;
            let label = s.subgraph.split('@').next().unwrap_or(&s.subgraph).to_string();
            chart.draw_series(std::iter::once(Text::new(
                label,
                (s.start_s * 1e3, y + 0.12 + 0.08 * (i % 3) as f64),
                (FAMILY, 12).into_font().color(&BLACK),
            )))?;
        }
        for m in &trace.moves {
            let y = row_of(&m.to);
            chart.draw_series(std::iter::once(Circle::new((m.at_s * 1e3, y + 0.5), 5, RED.filled())))?;
            chart.draw_series(std::iter::once(Text::new(
                m.to_string(),
                (m.at_s * 1e3, y + 0.95),
                (FAMILY, 11).into_font().color(&RED),
            )))?;
        }
        root.present()?;
        Ok(())
    };
    draw()
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("cannot write the Gantt chart {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_rt::{Moved, Span};

    #[test]
    fn writes_a_png_with_a_row_per_processor() {
        let span = |sg: &str, p: &str, a: f64, b: f64, mp: bool| Span {
            subgraph: sg.into(),
            processor: p.into(),
            start_s: a,
            end_s: b,
            meeting_point: mp,
        };
        let trace = Trace {
            spans: vec![
                span("sg0@cpu0", "cpu0", 0.0, 0.001, false),
                span("sg1@cpu0", "cpu0", 0.001, 0.002, false),
                span("sg2@cpu1", "cpu1", 0.001, 0.003, false),
                span("sg3@cpu0", "cpu0", 0.003, 0.004, true),
            ],
            moves: vec![Moved {
                subgraph: "sg2@cpu1".into(),
                from: "cpu1".into(),
                to: "cpu0".into(),
                at_s: 0.004,
                reason: "slow",
            }],
        };
        let dir = std::env::temp_dir().join(format!("stretch-gantt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("g.png");
        write_png(&path, "test", &["cpu0".into(), "cpu1".into()], &trace).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let height = u32::from_be_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
        assert_eq!(height, 110 + 70 * 2);
        let e = write_png(&dir.join("no/such/dir/g.png"), "t", &["cpu0".into()], &trace).unwrap_err();
        assert!(format!("{e:#}").contains("no/such/dir"), "{e:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
