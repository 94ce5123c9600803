//! What Heimdall's coordinator and its baselines are configured with, as
//! a workload with a `[render]` task sets it.

use crate::core::workload::{Utility, Workload};
use crate::policy::PolicyOptions;

/// Options of the policies that need a rendering task, kept in
/// [`PolicyOptions`] ([`PolicyOptions::get`]).
#[derive(Clone, Debug, Default)]
pub struct HeimdallOptions {
    /// Per app.
    pub utility: Vec<Utility>,
    /// Per model: the worker it starts on.
    pub home: Vec<usize>,
    pub margin_ms: f64,
    /// (render worker, CPU worker, m, cycle ms) for the `-offload` variants.
    pub offload: Option<(usize, usize, f64, f64)>,
}

impl HeimdallOptions {
    /// What a `[render]` task of `workload` configures on processors
    /// `names` (in worker order): each app starts on its `processor`, else
    /// the render processor; offloading to `render.offload_to`. `None`
    /// without a render task.
    pub fn for_workload(workload: &Workload, names: &[String]) -> Option<HeimdallOptions> {
        let r = workload.render.as_ref()?;
        let index = |p: &str| names.iter().position(|n| n == p).unwrap_or(0);
        Some(HeimdallOptions {
            utility: workload.apps.iter().map(|a| a.utility).collect(),
            home: workload
                .apps
                .iter()
                .map(|a| index(a.processor.as_deref().unwrap_or(&r.processor)))
                .collect(),
            margin_ms: r.margin_ms,
            offload: r.offload_to.as_ref().map(|cpu| {
                (
                    index(&r.processor),
                    index(cpu),
                    r.offload_margin,
                    r.offload_cycle_s * 1e3,
                )
            }),
        })
    }
}

/// Sets `options`' [`HeimdallOptions`] from `workload`'s render task, if
/// it has one (the registry's configurator for Heimdall).
pub fn configure(workload: &Workload, names: &[String], options: &mut PolicyOptions) {
    if let Some(h) = HeimdallOptions::for_workload(workload, names) {
        options.set(h);
    }
}

/// The render-task options of `options`, or why a render policy cannot be made.
pub fn render(options: &PolicyOptions) -> Result<&HeimdallOptions, String> {
    options
        .get::<HeimdallOptions>()
        .ok_or_else(|| "needs a workload with a [render] task".to_string())
}
