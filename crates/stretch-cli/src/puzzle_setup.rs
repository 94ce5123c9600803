//! What `analyze` and `simulate --plan` share: a grouped workload, its
//! models' layer graphs and the device profile's processors and costs.

use crate::multi_common as mc;
use anyhow::{Context, Result, bail};
use graph_ir::Graph;
use multi_dnn::OpSupport;
use multi_dnn::core::workload::{Arrival, Workload};
use multi_dnn::predicted::costs::Costs;
use multi_dnn::puzzle::chromosome::LayerGraph;
use multi_dnn::puzzle::evaluate::Problem;
use predictor::DeviceModel;
use std::path::Path;

pub struct Scenario {
    /// The device profile, when costs are predicted.
    pub device: Option<DeviceModel>,
    /// The runtime's processors, when costs are measured on this machine.
    pub procs: Vec<scheduler_rt::ProcessorConfig>,
    pub names: Vec<String>,
    pub support: Vec<OpSupport>,
    /// Per processor: an accelerator (Band's β for its estimates).
    pub accel: Vec<bool>,
    pub workload: Workload,
    pub graphs: Vec<Graph>,
    pub layers: Vec<LayerGraph>,
    pub apps: Vec<String>,
}

/// Loads the workload (every app must belong to a `[[group]]`), its
/// models and the device profile.
pub fn load(workload: &Path, device: &Path) -> Result<Scenario> {
    let device = DeviceModel::load(device).with_context(|| format!("cannot load {}", device.display()))?;
    let (names, support, accel) = multi_dnn::predicted::processors(&device);
    load_with(workload, Some(device), Vec::new(), names, &support, accel)
}

/// The search problem of `sc` with `costs`, its groups' periods resolved
/// from each model's fastest isolated latency (returned, per app).
pub fn problem<'a>(sc: &'a Scenario, costs: &'a mut dyn Costs, periods: usize) -> Result<(Problem<'a>, Vec<f64>)> {
    let mut problem = Problem {
        graphs: &sc.graphs,
        layers: &sc.layers,
        names: sc.names.clone(),
        costs,
        workload: sc.workload.clone(),
        periods,
        simulations: 0,
    };
    let fastest = multi_dnn::puzzle::mapping::resolve_groups(&mut problem)?;
    Ok((problem, fastest))
}

/// [`load`] for the runtime's processors (costs measured here).
pub fn load_runtime(
    workload: &Path,
    config: &Option<std::path::PathBuf>,
    flags: &[scheduler_rt::ProcessorConfig],
) -> Result<Scenario> {
    let scheduler_rt::RuntimeConfig {
        processors: procs,
        support,
        accelerator: accel,
        ..
    } = crate::commands::serve::processors(config, flags)?;
    let names = procs.iter().map(|p| p.name.clone()).collect();
    load_with(workload, None, procs, names, &support, accel)
}

fn load_with(
    workload: &Path,
    device: Option<DeviceModel>,
    procs: Vec<scheduler_rt::ProcessorConfig>,
    names: Vec<String>,
    support: &[OpSupport],
    accel: Vec<bool>,
) -> Result<Scenario> {
    let w = mc::load_workload(workload, &names, None)?;
    if w.groups.is_empty() {
        bail!(
            "{}: no [[group]]: Puzzle plans model groups that share a periodic input (add [[group]] and arrival = \"group\")",
            w.file
        );
    }
    for (i, a) in w.apps.iter().enumerate() {
        if !matches!(a.arrival, Arrival::Group { .. }) {
            bail!(
                "{}: app[{i}] ({}): not in a group (arrival = \"group\", group = \"NAME\")",
                w.file,
                a.name
            );
        }
    }
    for (g, group) in w.groups.iter().enumerate() {
        if w.group_members(g).is_empty() {
            bail!("{}: group[{g}] ({}) has no app", w.file, group.name);
        }
    }
    let graphs = mc::load_graphs(&w)?;
    let mut layers = Vec::with_capacity(graphs.len());
    for g in &graphs {
        layers.push(LayerGraph::new(g, &names, support).with_context(|| format!("model '{}'", g.name))?);
    }
    let apps = w.apps.iter().map(|a| a.name.clone()).collect();
    Ok(Scenario {
        device,
        procs,
        names,
        support: support.to_vec(),
        accel,
        workload: w,
        graphs,
        layers,
        apps,
    })
}

/// The predictor's costs for a scenario loaded with a device profile.
pub fn predicted(sc: &Scenario) -> Result<multi_dnn::predicted::costs::Predicted<'_>> {
    let device = sc.device.as_ref().context("costs need a device profile (--device)")?;
    Ok(multi_dnn::predicted::costs::Predicted::new(
        device, &sc.graphs, &sc.layers,
    )?)
}

/// Per app of `apps`, its figures in a plan file's `apps` list (`None`
/// where the plan has none, as plans written before they were added).
pub fn app_figures(list: &serde_json::Value, apps: &[String]) -> Vec<Option<multi_dnn::puzzle::breakdown::AppFigures>> {
    let list = list.as_array().map(Vec::as_slice).unwrap_or_default();
    apps.iter()
        .map(|name| {
            let entry = list.iter().find(|x| x["app"] == name.as_str())?;
            serde_json::from_value(entry.clone()).ok()
        })
        .collect()
}

/// A breakdown's per-app medians as a plan file's `apps` figures.
pub fn app_values(b: &multi_dnn::puzzle::breakdown::Breakdown, apps: &[String]) -> Vec<serde_json::Value> {
    apps.iter()
        .enumerate()
        .filter_map(|(a, name)| {
            let f = b.app(a)?;
            Some(serde_json::json!({
                "app": name,
                "latency_ms": f.latency_ms,
                "running_ms": f.running_ms,
                "waiting_ms": f.waiting_ms,
            }))
        })
        .collect()
}
