//! The analyzer's search as a PNG: every plan of the final population by
//! its first group's mean and p90 makespan (axes spanning the front and
//! the baselines; population points beyond them left out), the Pareto front
//! (joined when there is one group, so it is a front in this plane), and
//! the baselines marked.

use crate::gantt::{FAMILY, PALETTE, register};
use anyhow::{Result, anyhow};
use plotters::prelude::*;
use std::path::Path;

/// `population` and `front`: objective vectors (mean, p90, ...); `marks`:
/// named baselines' objective vectors.
pub fn write_png(path: &Path, population: &[Vec<f64>], front: &[Vec<f64>], marks: &[(String, Vec<f64>)]) -> Result<()> {
    register()?;
    let pts = |v: &[Vec<f64>]| -> Vec<(f64, f64)> {
        v.iter()
            .filter(|o| o.len() >= 2 && o[0].is_finite() && o[1].is_finite())
            .map(|o| (o[0], o[1]))
            .collect()
    };
    let (pop, fr) = (pts(population), pts(front));
    let mk: Vec<(String, (f64, f64))> = marks
        .iter()
        .filter(|(_, o)| o.len() >= 2 && o[0].is_finite() && o[1].is_finite())
        .map(|(n, o)| (n.clone(), (o[0], o[1])))
        .collect();
    let all: Vec<(f64, f64)> = fr.iter().copied().chain(mk.iter().map(|m| m.1)).collect();
    if all.is_empty() {
        return Err(anyhow!("{}: nothing finite to plot", path.display()));
    }
    let (x0, x1) = all
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = all
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let pad = |lo: f64, hi: f64| {
        let d = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-3);
        (lo - d).max(0.0)..hi + d
    };
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let root = BitMapBackend::new(path, (900, 640)).into_drawing_area();
        root.fill(&WHITE)?;
        let inside = |p: &&(f64, f64)| p.0 <= x1 * 1.05 && p.1 <= y1 * 1.05;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "stretch analyze: plans by makespan (simulated, first group)",
                (FAMILY, 18),
            )
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(pad(x0, x1), pad(y0, y1))?;
        chart
            .configure_mesh()
            .x_desc("mean makespan (ms)")
            .y_desc("p90 makespan (ms)")
            .label_style((FAMILY, 13))
            .draw()?;
        chart
            .draw_series(
                pop.iter()
                    .filter(inside)
                    .map(|p| Circle::new(*p, 3, RGBColor(170, 170, 170).filled())),
            )?
            .label("population (within the front's and baselines' range)")
            .legend(|(x, y)| Circle::new((x, y), 3, RGBColor(170, 170, 170).filled()));
        let mut line = fr.clone();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        if front.iter().all(|o| o.len() == 2) {
            chart.draw_series(std::iter::once(PathElement::new(line, PALETTE[0].stroke_width(2))))?;
        }
        chart
            .draw_series(fr.iter().map(|p| Circle::new(*p, 5, PALETTE[0].filled())))?
            .label("GA Pareto front")
            .legend(|(x, y)| Circle::new((x, y), 5, PALETTE[0].filled()));
        for (i, (name, p)) in mk.iter().enumerate() {
            let c = PALETTE[(i + 1) % PALETTE.len()];
            chart
                .draw_series(std::iter::once(TriangleMarker::new(*p, 8, c.filled())))?
                .label(name.clone())
                .legend(move |(x, y)| TriangleMarker::new((x, y), 6, c.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FAMILY, 13))
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow!("cannot draw {}: {e}", path.display()))
}
