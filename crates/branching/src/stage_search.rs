//! The search of one stage (paper Eq. 4-6): every subset of two or more
//! processors, every (depth, width) option per branch, the constraints that
//! remove candidates and the tie-break that picks among the fastest.

use crate::branch::{BranchSpec, build_branch_at, channels, project, scale, shares};
use crate::error::BranchError;
use crate::merge_cost::{Widening, widening};
use crate::plan::{BranchPlan, Counts, Merge, Settings, StagePlan};
use crate::search::{Candidate, SearchReport};
use graph_ir::Graph;
use graph_ir::analysis::Stage;
use predictor::LatencyModel;
use predictor::profile::ProcessorKind;
use std::collections::{BTreeMap, HashMap};

/// One stage to plan and what its search reads: the graph, the latency
/// model, the asked processors (the first branch's input and every merge
/// on `primary`) and the settings. `in_width` is the stage's input width
/// when an earlier `concat` merge changed it.
pub(crate) struct StageSearch<'a> {
    pub g: &'a Graph,
    pub stage: &'a Stage,
    pub in_width: Option<usize>,
    pub model: &'a dyn LatencyModel,
    pub processors: &'a [String],
    pub primary: &'a str,
    pub kinds: &'a HashMap<String, ProcessorKind>,
    pub settings: &'a Settings,
}

/// The constraint that removed a candidate.
enum Removal {
    /// Eq. 5: the branch on `processors[processor]` takes `ms`.
    Eq5 { processor: usize, ms: f64 },
    /// The branches' MACs are `ratio` x the stage's, outside the band.
    Capacity { ratio: f64 },
}

impl Removal {
    fn describe(&self, processors: &[String], settings: &Settings, seg_ms: f64) -> String {
        match self {
            Removal::Eq5 { processor, ms } => format!(
                "Eq. 5: branch on {} {ms:.3} ms > beta {} x {seg_ms:.3} ms",
                processors[*processor], settings.beta
            ),
            Removal::Capacity { ratio } => format!(
                "capacity: branch MACs {ratio:.2}x the stage, outside [{}, {}]",
                settings.capacity[0], settings.capacity[1]
            ),
        }
    }
}

/// One (depth, width) option of a branch on one processor.
#[derive(Clone, Debug)]
struct Option_ {
    depth: usize,
    width: usize,
    body_ms: f64,
    macs: u64,
    params: u64,
}

/// The stage left whole, the template of every plan of it, and the
/// figures every candidate is measured against.
struct Whole {
    /// The whole stage on `primary` (no reason, no candidates counted).
    plan: StagePlan,
    /// The original stage on its fastest processor.
    seg_ms: f64,
    /// What the stage's own input width change costs its first layers.
    widened: Widening,
}

impl Whole {
    /// The stage left whole for `reason`, after `counts` candidates.
    fn stays(&self, reason: String, counts: Counts) -> StagePlan {
        let mut sp = StagePlan {
            reason: Some(reason),
            candidates: counts,
            ..self.plan.clone()
        };
        sp.work_ratio = sp.planned_work_ratio();
        sp
    }
}

/// A candidate kept by the constraints: its ranking time (the stage plus
/// what its merge width costs the layers after it), its tie-break score,
/// its branches and its stage time.
type Kept = (f64, f64, Vec<BranchPlan>, f64);

/// A branch body: its depth, its width and its graph.
type Body = (usize, usize, Graph);
type Bodies = Vec<Body>;

/// What the enumeration of candidates gathers.
#[derive(Default)]
struct Tally {
    counts: Counts,
    kept: Vec<Kept>,
    removed_eq5: u64,
    removed_cap: u64,
    /// The layers after the stage at a merge width, by width.
    after_ms: HashMap<usize, f64>,
    /// A merge projection's (ms, MACs) by (processor, in, out) channels.
    proj: HashMap<(usize, usize, usize), (f64, u64)>,
}

/// What every candidate of the stage shares once the options are known.
struct Table<'o> {
    whole: &'o Whole,
    options: &'o [Vec<Option_>],
    /// The hand-off of the stage's input to each processor.
    comm_in: &'o [f64],
    /// The stage's output width and its spatial size.
    width: usize,
    hw: usize,
    /// The stage's MACs, its input widening included.
    stage_macs: f64,
}

impl StageSearch<'_> {
    /// Plans the stage: branched by the best candidate, or whole with the
    /// reason.
    pub(crate) fn plan(&self, explain: bool, report: &mut SearchReport) -> Result<StagePlan, BranchError> {
        let whole = self.whole()?;
        if self.processors.len() < 2 {
            return Ok(whole.stays("one processor: nothing to branch".into(), Counts::default()));
        }
        let (g, stage) = (self.g, self.stage);
        let in_bytes = match self.in_width {
            Some(w) => bytes(g, stage.input()) / channels(g, stage.input()).max(1) as u64 * w as u64,
            None => bytes(g, stage.input()),
        };
        let cheapest = self.cheapest_comm(in_bytes, bytes(g, stage.output()))?;
        if cheapest > self.settings.alpha * whole.seg_ms {
            return Ok(whole.stays(
                format!(
                    "Eq. 4: communication {cheapest:.3} ms > alpha {} x segment {:.3} ms",
                    self.settings.alpha, whole.seg_ms
                ),
                Counts::default(),
            ));
        }
        let bodies = match self.bodies()? {
            Ok(bodies) => bodies,
            Err(reason) => return Ok(whole.stays(reason, Counts::default())),
        };
        self.model
            .prepare(&bodies.iter().map(|b| &b.2).collect::<Vec<_>>(), self.processors)?;
        let options = self.options(&bodies)?;
        let comm_in = self.comm_in(in_bytes)?;
        if self.settings.merge == Merge::Concat
            && let Err(e @ BranchError::Unsupported { .. }) = widening(
                g,
                stage.output(),
                whole.plan.channels,
                stage.index,
                self.model,
                self.primary,
            )
        {
            return Ok(whole.stays(e.to_string(), Counts::default()));
        }
        let table = Table {
            whole: &whole,
            options: &options,
            comm_in: &comm_in,
            width: whole.plan.channels,
            hw: self.shape(stage.output()).iter().skip(2).product(),
            stage_macs: (whole.plan.macs as i64 + whole.widened.macs).max(1) as f64,
        };
        let tally = self.enumerate(&table, explain, report)?;
        Ok(self.choose(&whole, tally))
    }

    fn shape(&self, o: graph_ir::Outlet) -> Vec<usize> {
        self.g.fact(o).map(|f| f.shape.clone()).unwrap_or_default()
    }

    /// The stage whole on `primary` and the original stage on every
    /// processor.
    fn whole(&self) -> Result<Whole, BranchError> {
        let (g, stage) = (self.g, self.stage);
        let nodes = g.computing(stage.nodes());
        let macs = g.cost_of(&nodes).macs;
        let mut original_ms = BTreeMap::new();
        for p in self.processors {
            original_ms.insert(p.clone(), self.model.predict(g, &nodes, p)?.total_ms);
        }
        let seg_ms = original_ms.values().copied().fold(f64::INFINITY, f64::min);
        let widened = match self.in_width {
            Some(w) => widening(g, stage.input(), w, stage.index, self.model, self.primary)?,
            None => Widening::default(),
        };
        let predicted_ms = original_ms[self.primary] + widened.ms;
        let plan = StagePlan {
            index: stage.index,
            blocks: stage.blocks.len(),
            channels: channels(g, stage.output()),
            input_shape: self.shape(stage.input()),
            output_shape: self.shape(stage.output()),
            macs,
            original_ms,
            branches: Vec::new(),
            processor: self.primary.to_string(),
            reason: None,
            predicted_ms,
            candidates: Counts::default(),
            widened_macs: widened.macs,
            work_ratio: 1.0,
        };
        Ok(Whole { plan, seg_ms, widened })
    }

    /// The cheapest communication of any pair of processors (Eq. 4): per
    /// subset, its worst processor's hand-off in and out of `primary`.
    fn cheapest_comm(&self, in_bytes: u64, out_bytes: u64) -> Result<f64, BranchError> {
        let (model, primary, processors) = (self.model, self.primary, self.processors);
        let comm_of = |sub: &[usize]| -> Result<f64, BranchError> {
            let mut worst = 0.0f64;
            for p in sub.iter().map(|&i| &processors[i]).filter(|p| p.as_str() != primary) {
                worst = worst.max(model.comm_ms(primary, p, in_bytes)? + model.comm_ms(p, primary, out_bytes)?);
            }
            Ok(worst)
        };
        Ok((0..processors.len())
            .flat_map(|a| ((a + 1)..processors.len()).map(move |b| [a, b]))
            .map(|pair| comm_of(&pair))
            .collect::<Result<Vec<f64>, _>>()?
            .into_iter()
            .fold(f64::INFINITY, f64::min))
    }

    /// A branch body per (depth, width) of the grid; `Err` with the reason
    /// the stage stays whole when its branches cannot be built.
    fn bodies(&self) -> Result<Result<Bodies, String>, BranchError> {
        let stage = self.stage;
        let (depths, widths) = grid(stage.blocks.len(), channels(self.g, stage.output()), self.settings);
        let mut bodies: Bodies = Vec::new();
        let mut unbuilt = None;
        for &d in &depths {
            for &w in &widths {
                let spec = BranchSpec {
                    depth: d,
                    width: w,
                    project_to: None,
                    weights: false,
                    multiple: self.settings.width_multiple,
                };
                match build_branch_at(self.g, stage, &spec, self.in_width, 0, "") {
                    Ok(b) => bodies.push((d, w, b)),
                    Err(e @ BranchError::Unsupported { .. }) => return Ok(Err(e.to_string())),
                    Err(BranchError::Graph(e)) => {
                        unbuilt.get_or_insert(format!(
                            "stage {}: a branch {d} blocks deep and {w} channels wide does not build: {e}",
                            stage.index
                        ));
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if bodies.is_empty()
            && let Some(reason) = unbuilt
        {
            return Ok(Err(reason));
        }
        Ok(Ok(bodies))
    }

    /// Every body's time and cost, per processor.
    fn options(&self, bodies: &[Body]) -> Result<Vec<Vec<Option_>>, BranchError> {
        let mut options: Vec<Vec<Option_>> = Vec::new();
        for p in self.processors {
            let mut list = Vec::new();
            for (d, w, b) in bodies {
                let cost = b.total_cost();
                list.push(Option_ {
                    depth: *d,
                    width: *w,
                    body_ms: self.model.predict_graph(b, p)?.total_ms,
                    macs: cost.macs,
                    params: cost.params,
                });
            }
            options.push(list);
        }
        Ok(options)
    }

    /// The hand-off of `in_bytes` from `primary` to each processor.
    fn comm_in(&self, in_bytes: u64) -> Result<Vec<f64>, BranchError> {
        Ok(self
            .processors
            .iter()
            .map(|p| {
                if p == self.primary {
                    Ok(0.0)
                } else {
                    self.model.comm_ms(self.primary, p, in_bytes)
                }
            })
            .collect::<Result<Vec<f64>, _>>()?)
    }

    /// A 1x1 merge projection from `cin` to `cout` channels on processor
    /// `pi`: its time and MACs.
    fn projection(&self, tally: &mut Tally, pi: usize, cin: usize, cout: usize) -> Result<(f64, u64), BranchError> {
        if let Some(v) = tally.proj.get(&(pi, cin, cout)) {
            return Ok(*v);
        }
        let mut b = Graph::new("proj");
        let out_shape = self.shape(self.stage.output());
        let x = b.add_input("x", graph_ir::Fact::f32(vec![1, cin, out_shape[2], out_shape[3]]))?;
        let y = project(&mut b, x, cout, false, 0, "p")?;
        b.set_outputs(vec![("y".into(), y)])?;
        let v = (
            self.model.predict_graph(&b, &self.processors[pi])?.total_ms,
            b.total_cost().macs,
        );
        tally.proj.insert((pi, cin, cout), v);
        Ok(v)
    }

    /// Every candidate: each subset of two or more processors, each option
    /// per branch, in order.
    fn enumerate(&self, table: &Table, explain: bool, report: &mut SearchReport) -> Result<Tally, BranchError> {
        let n_proc = self.processors.len();
        let per = table.options[0].len();
        let mut tally = Tally::default();
        for mask in 1usize..(1 << n_proc) {
            if mask.count_ones() < 2 {
                continue;
            }
            let sub: Vec<usize> = (0..n_proc).filter(|i| mask & (1 << i) != 0).collect();
            let n = sub.len();
            let mut idx = vec![0usize; n];
            loop {
                tally.counts.considered += 1;
                let candidate = self.candidate(table, &mut tally, &sub, &idx)?;
                if explain {
                    report.candidates.push(candidate);
                }
                if !advance(&mut idx, per) {
                    break;
                }
            }
        }
        Ok(tally)
    }

    /// Prices the candidate of options `idx` on processors `sub`, keeps it
    /// in `tally` when no constraint removes it and returns its record.
    fn candidate(
        &self,
        table: &Table,
        tally: &mut Tally,
        sub: &[usize],
        idx: &[usize],
    ) -> Result<Candidate, BranchError> {
        let (settings, primary) = (self.settings, self.primary);
        let chosen: Vec<&Option_> = (0..sub.len()).map(|i| &table.options[sub[i]][idx[i]]).collect();
        let mut branches = Vec::with_capacity(sub.len());
        let mut total_macs = 0u64;
        let mut stage_ms = 0.0f64;
        let mut removed: Option<Removal> = None;
        let split = shares(
            table.width,
            &chosen.iter().map(|o| o.width).collect::<Vec<_>>(),
            settings.width_multiple,
        );
        for (i, o) in chosen.iter().enumerate() {
            let share = match settings.merge {
                Merge::Project => Some(split[i]),
                Merge::Concat => None,
            };
            let (proj_ms, proj_macs) = match share {
                Some(c) => self.projection(tally, sub[i], o.width, c)?,
                None => (0.0, 0),
            };
            let run_ms = o.body_ms + proj_ms;
            if removed.is_none() && run_ms > settings.beta * table.whole.seg_ms {
                removed = Some(Removal::Eq5 {
                    processor: sub[i],
                    ms: run_ms,
                });
            }
            let p = &self.processors[sub[i]];
            let out_b = (share.unwrap_or(o.width) * table.hw * 4) as u64;
            let comm = if p == primary {
                0.0
            } else {
                table.comm_in[sub[i]] + self.model.comm_ms(p, primary, out_b)?
            };
            stage_ms = stage_ms.max(run_ms + comm);
            total_macs += o.macs + proj_macs;
            branches.push(BranchPlan {
                processor: p.clone(),
                depth: o.depth,
                width: o.width,
                project_to: share,
                macs: o.macs + proj_macs,
                params: o.params,
                predicted_ms: run_ms + comm,
            });
        }
        let ratio = total_macs as f64 / table.stage_macs;
        if removed.is_none() && !(settings.capacity[0]..=settings.capacity[1]).contains(&ratio) {
            removed = Some(Removal::Capacity { ratio });
        }
        match &removed {
            Some(Removal::Eq5 { .. }) => tally.removed_eq5 += 1,
            Some(Removal::Capacity { .. }) => tally.removed_cap += 1,
            None => {
                tally.counts.kept += 1;
                let tie = self.tie_break(table, sub, &branches, total_macs);
                let after = self.after_ms(table, tally, &branches)?;
                tally.kept.push((stage_ms + after, tie, branches.clone(), stage_ms));
            }
        }
        Ok(Candidate {
            stage: self.stage.index,
            branches: branches
                .iter()
                .map(|b| (b.processor.clone(), b.depth, b.width))
                .collect(),
            branch_macs: branches.iter().map(|b| b.macs).collect(),
            predicted_ms: stage_ms,
            macs_ratio: ratio,
            removed_by: removed.map(|r| r.describe(self.processors, settings, table.whole.seg_ms)),
        })
    }

    /// Eq. 6's distance of the branches' MACs from the processors' speed
    /// shares plus half their distance from the preferred scaling.
    fn tie_break(&self, table: &Table, sub: &[usize], branches: &[BranchPlan], total_macs: u64) -> f64 {
        let original_ms = &table.whole.plan.original_ms;
        let speed: Vec<f64> = sub
            .iter()
            .map(|&i| 1.0 / original_ms[&self.processors[i]].max(1e-12))
            .collect();
        let speed_sum: f64 = speed.iter().sum();
        let eq6: f64 = branches
            .iter()
            .zip(&speed)
            .map(|(b, s)| (b.macs as f64 / total_macs.max(1) as f64 - s / speed_sum).abs())
            .sum();
        let pref: f64 = branches
            .iter()
            .map(|b| match self.kinds.get(&b.processor) {
                Some(ProcessorKind::Gpu | ProcessorKind::Dsp | ProcessorKind::Npu) => {
                    1.0 - b.width as f64 / table.width as f64
                }
                _ => 1.0 - b.depth as f64 / self.stage.blocks.len() as f64,
            })
            .sum();
        eq6 + 0.5 * pref
    }

    /// What a `concat` merge of `branches` costs the layers after the
    /// stage when it changes the stage's width.
    fn after_ms(&self, table: &Table, tally: &mut Tally, branches: &[BranchPlan]) -> Result<f64, BranchError> {
        let out_width: usize = branches.iter().map(|b| b.width).sum();
        Ok(match self.settings.merge {
            Merge::Concat if out_width != table.width => match tally.after_ms.get(&out_width) {
                Some(v) => *v,
                None => {
                    let stage = self.stage;
                    let v = widening(self.g, stage.output(), out_width, stage.index, self.model, self.primary)?.ms;
                    tally.after_ms.insert(out_width, v);
                    v
                }
            },
            _ => 0.0,
        })
    }

    /// The winner among the kept candidates within 1% of the fastest, or
    /// the stage whole when none is kept or the winner is not faster.
    fn choose(&self, whole: &Whole, tally: Tally) -> StagePlan {
        let Tally {
            counts,
            kept,
            removed_eq5,
            removed_cap,
            ..
        } = tally;
        let fastest_ms = kept.iter().map(|k| k.0).fold(f64::INFINITY, f64::min);
        let best = kept
            .into_iter()
            .filter(|k| k.0 <= fastest_ms * 1.01)
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.total_cmp(&b.0)));
        let Some((ranked, _, branches, ms)) = best else {
            return whole.stays(
                format!(
                    "no candidate met the constraints ({} considered: {removed_eq5} removed by Eq. 5, {removed_cap} by the capacity band)",
                    counts.considered
                ),
                counts,
            );
        };
        let whole_ms = whole.plan.predicted_ms;
        if ranked >= whole_ms {
            return whole.stays(
                format!(
                    "the best candidate ({ranked:.3} ms) is not faster than the whole stage on {} ({whole_ms:.3} ms)",
                    self.primary
                ),
                counts,
            );
        }
        let mut sp = StagePlan {
            reason: None,
            branches,
            predicted_ms: ms,
            candidates: counts,
            widened_macs: 0,
            ..whole.plan.clone()
        };
        sp.work_ratio = sp.planned_work_ratio();
        sp
    }
}

/// The next combination of option indices (the first index fastest);
/// `false` after the last.
fn advance(idx: &mut [usize], per: usize) -> bool {
    for i in idx.iter_mut() {
        *i += 1;
        if *i < per {
            return true;
        }
        *i = 0;
    }
    false
}

fn bytes(g: &Graph, o: graph_ir::Outlet) -> u64 {
    g.fact(o).map_or(0, |f| f.shape.iter().product::<usize>() as u64 * 4)
}

/// Depths within the bound (at least 1) and widths at every
/// 1/`width_steps` of the stage width within the bound, rounded to
/// multiples of the settings' `width_multiple`.
fn grid(blocks: usize, width: usize, s: &Settings) -> (Vec<usize>, Vec<usize>) {
    let d_lo = ((s.min_depth * blocks as f64).ceil() as usize).clamp(1, blocks);
    let depths = (d_lo..=blocks).collect();
    let steps = s.width_steps.max(1);
    let mut widths: Vec<usize> = (0..=steps)
        .map(|i| scale(width, i as f64 / steps as f64, s.width_multiple))
        .filter(|w| *w as f64 >= s.min_width * width as f64 - 1e-9 && *w <= width)
        .collect();
    widths.dedup();
    if widths.is_empty() {
        widths.push(width);
    }
    (depths, widths)
}
