//! The profiling run: an initial round of sampled configurations per kernel
//! class, then adaptive rounds around the worst-predicted ones; every
//! configuration already in the CSV is skipped, every new one is measured and
//! appended at once.

use super::adaptive::{self, MIN_ROWS};
use super::csv::{Existing, Row, Store, key};
use super::error::ProfilerError;
use super::kernel_graph::KernelGraph;
use super::space::{self, KernelConfig, KernelKind, Origin};
use super::timing;
use crate::forest::SplitMix64;
use engine::Engine;
use engine::host::CoreSet;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// What to sample and how to time it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// Kernel classes to profile.
    pub kinds: Vec<KernelKind>,
    /// Configurations per class in the initial round; also the most an
    /// adaptive round adds to a class.
    pub samples: usize,
    /// Adaptive rounds after the initial one.
    pub rounds: u32,
    /// Timed runs per kernel (at least 1).
    pub reps: usize,
    /// Untimed runs before them.
    pub warmup: usize,
    /// Seeds sampling, weights and inputs: the same seed plans the same kernels.
    pub seed: u64,
    /// Relative error above which a configuration gets neighbours (0.10).
    pub threshold: f64,
    /// Neighbours sampled around each badly predicted configuration.
    pub per_point: usize,
    /// Configurations above these FLOPs or bytes (`features::work`) are not sampled.
    pub max_flops: u64,
    pub max_bytes: u64,
}

impl Settings {
    /// A profile of a few minutes on one desktop core.
    pub fn standard() -> Settings {
        Settings {
            kinds: KernelKind::ALL.to_vec(),
            samples: 150,
            rounds: 1,
            reps: 30,
            warmup: 5,
            seed: 0,
            threshold: 0.10,
            per_point: 2,
            max_flops: 1_000_000_000,
            max_bytes: 64 << 20,
        }
    }

    /// Small kernels, few samples and runs: seconds, for tests.
    pub fn quick() -> Settings {
        Settings {
            samples: 8,
            reps: 3,
            warmup: 1,
            per_point: 1,
            max_flops: 20_000_000,
            max_bytes: 1 << 20,
            ..Settings::standard()
        }
    }

    fn validate(&self) -> Result<(), ProfilerError> {
        let bad = |name, reason: &str| {
            Err(ProfilerError::Setting {
                name,
                reason: reason.into(),
            })
        };
        if self.samples == 0 {
            return bad("samples", "must be at least 1");
        }
        if self.reps == 0 {
            return bad("reps", "must be at least 1");
        }
        if self.kinds.is_empty() {
            return bad("kinds", "no kernel class to profile");
        }
        if !(self.threshold > 0.0 && self.threshold.is_finite()) {
            return bad("threshold", "must be a positive number");
        }
        Ok(())
    }
}

/// Progress of a run, reported as it happens.
#[derive(Debug)]
pub enum Event<'a> {
    /// A round is planned: `to_measure` new kernels, `resumed` already in the CSV.
    Round {
        round: u32,
        to_measure: usize,
        resumed: usize,
    },
    /// The adaptive predictor of one class was judged.
    Fitted(&'a ClassRound),
    /// A kernel was measured and its row appended.
    Measured { config: &'a KernelConfig, row: &'a Row },
}

/// Per class: rows in the CSV after the run, measured by it, found in the CSV.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClassCounts {
    pub rows: usize,
    pub measured: usize,
    pub resumed: usize,
}

/// One class in one adaptive round.
#[derive(Clone, Debug, Serialize)]
pub struct ClassRound {
    pub round: u32,
    pub class: KernelKind,
    /// Rows of earlier rounds the predictor was fitted on (0: too few to fit).
    pub fitted_rows: usize,
    /// Of those, rows predicted within the threshold (out of fold).
    pub within_threshold: usize,
    /// Rows above it, around which neighbours were sampled.
    pub badly_predicted: usize,
    /// New configurations planned around them.
    pub added: usize,
}

/// What a run did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub classes: BTreeMap<String, ClassCounts>,
    pub adaptive: Vec<ClassRound>,
    pub measured: usize,
    pub resumed: usize,
    /// Line of a row cut off by an interruption, dropped and measured again.
    pub torn_line: Option<usize>,
}

/// Profiles kernels on one engine pinned to `cores` (the caller pins).
pub struct Profiler<'a> {
    pub engine: &'a dyn Engine,
    pub cores: CoreSet,
    pub settings: Settings,
}

struct State {
    rows: Vec<Row>,
    keys: HashSet<String>,
    summary: Summary,
}

fn class_seed(seed: u64, kind: KernelKind, round: u32) -> u64 {
    let idx = KernelKind::ALL.iter().position(|k| *k == kind).unwrap_or(0) as u64;
    seed ^ (idx + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(round).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

impl Profiler<'_> {
    /// Runs the initial and adaptive rounds, appending to `store` the kernels
    /// not among `existing` (its rows, as [`Store::open`] read them).
    ///
    /// Fails before measuring anything when an existing row was measured with
    /// another engine, thread count or core set.
    pub fn run(
        &self,
        store: &mut Store,
        existing: Existing,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<Summary, ProfilerError> {
        self.settings.validate()?;
        let mut state = State {
            rows: Vec::new(),
            keys: HashSet::new(),
            summary: Summary {
                torn_line: existing.torn_line,
                ..Summary::default()
            },
        };
        for (line, row) in existing.rows {
            self.check_same_setup(store, line, &row)?;
            state.keys.insert(row.key());
            state.rows.push(row);
        }
        let mut plan = Vec::new();
        for &kind in &self.settings.kinds {
            plan.extend(self.initial(kind));
        }
        self.measure_round(0, plan, store, &mut state, on_event)?;
        for round in 1..=self.settings.rounds {
            let mut plan = Vec::new();
            for &kind in &self.settings.kinds {
                let (stats, kernels) = self.adaptive(kind, round, &state)?;
                on_event(Event::Fitted(&stats));
                state.summary.adaptive.push(stats);
                plan.extend(kernels.into_iter().map(|kg| (kg, Origin::Adaptive)));
            }
            self.measure_round(round, plan, store, &mut state, on_event)?;
        }
        for row in &state.rows {
            state.summary.classes.entry(row.kind.name().into()).or_default().rows += 1;
        }
        Ok(state.summary)
    }

    fn check_same_setup(&self, store: &Store, line: usize, row: &Row) -> Result<(), ProfilerError> {
        let checks = [
            ("engine", row.engine.clone(), self.engine.name().to_string()),
            ("threads", row.threads.to_string(), self.engine.threads().to_string()),
            ("cores", row.cores.to_string(), self.cores.to_string()),
        ];
        for (field, found, expected) in checks {
            if found != expected {
                return Err(ProfilerError::Mismatch {
                    path: store.path().to_path_buf(),
                    line,
                    field,
                    found,
                    expected,
                });
            }
        }
        Ok(())
    }

    fn within_limits(&self, kg: &KernelGraph) -> bool {
        kg.work.flops <= self.settings.max_flops && kg.work.bytes <= self.settings.max_bytes
    }

    /// The initial configurations of a class: alternately CNN shapes and
    /// random ones, distinct and within the limits. A prefix of the same
    /// stream for any `samples`, so raising it extends an earlier run.
    fn initial(&self, kind: KernelKind) -> Vec<(KernelGraph, Origin)> {
        let mut rng = SplitMix64::new(class_seed(self.settings.seed, kind, 0));
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for attempt in 0..self.settings.samples.saturating_mul(200) {
            if out.len() == self.settings.samples {
                break;
            }
            let (c, origin) = if attempt % 2 == 0 {
                (space::cnn(kind, &mut rng), Origin::Cnn)
            } else {
                (space::random(kind, &mut rng), Origin::Random)
            };
            if !seen.insert(c.clone()) {
                continue;
            }
            match KernelGraph::build(&c) {
                Ok(kg) if self.within_limits(&kg) => out.push((kg, origin)),
                _ => {}
            }
        }
        out
    }

    /// Judges the class's predictor on rows of earlier rounds and plans
    /// neighbours of the worst-predicted configurations.
    fn adaptive(
        &self,
        kind: KernelKind,
        round: u32,
        state: &State,
    ) -> Result<(ClassRound, Vec<KernelGraph>), ProfilerError> {
        let mut train: Vec<&Row> = state
            .rows
            .iter()
            .filter(|r| r.kind == kind && r.round < round)
            .collect();
        train.sort_by_key(|r| r.key());
        let mut stats = ClassRound {
            round,
            class: kind,
            fitted_rows: 0,
            within_threshold: 0,
            badly_predicted: 0,
            added: 0,
        };
        if train.len() < MIN_ROWS {
            return Ok((stats, Vec::new()));
        }
        let seed = class_seed(self.settings.seed, kind, round);
        let x: Vec<Vec<f64>> = train.iter().map(|r| r.features.clone()).collect();
        let y: Vec<f64> = train.iter().map(|r| r.median_ms.max(1e-6)).collect();
        let errors = adaptive::out_of_fold_errors(&x, &y, seed).map_err(|error| ProfilerError::Fit {
            class: kind.name().into(),
            error,
        })?;
        let bad = adaptive::worst(&errors, self.settings.threshold);
        stats.fitted_rows = train.len();
        stats.badly_predicted = bad.len();
        stats.within_threshold = train.len() - bad.len();
        // Rows of this round and later may exist (a resumed run): they must
        // not change the plan, only be skipped when it is measured.
        let earlier: HashSet<String> = train.iter().map(|r| r.key()).collect();
        let mut rng = SplitMix64::new(seed);
        let mut planned = HashSet::new();
        let mut out = Vec::new();
        'points: for i in bad {
            let Some(center) = KernelConfig::from_features(kind, &train[i].features) else {
                continue;
            };
            let mut added = 0;
            for _ in 0..self.settings.per_point * 8 {
                if out.len() == self.settings.samples {
                    break 'points;
                }
                if added == self.settings.per_point {
                    break;
                }
                let Ok(kg) = KernelGraph::build(&space::perturb(&center, &mut rng)) else {
                    continue;
                };
                let k = key(kind, &kg.features);
                if self.within_limits(&kg) && !earlier.contains(&k) && planned.insert(k) {
                    out.push(kg);
                    added += 1;
                }
            }
        }
        stats.added = out.len();
        Ok((stats, out))
    }

    fn measure_round(
        &self,
        round: u32,
        plan: Vec<(KernelGraph, Origin)>,
        store: &mut Store,
        state: &mut State,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), ProfilerError> {
        let (mut todo, done): (Vec<_>, Vec<_>) = plan
            .into_iter()
            .partition(|(kg, _)| !state.keys.contains(&key(kg.config.kind, &kg.features)));
        for (kg, _) in &done {
            state
                .summary
                .classes
                .entry(kg.config.kind.name().into())
                .or_default()
                .resumed += 1;
        }
        state.summary.resumed += done.len();
        SplitMix64::new(self.settings.seed ^ u64::from(round)).shuffle(&mut todo);
        on_event(Event::Round {
            round,
            to_measure: todo.len(),
            resumed: done.len(),
        });
        for (kg, origin) in todo {
            let row = self.measure(&kg, round, origin)?;
            store.append(&row)?;
            state.keys.insert(row.key());
            state
                .summary
                .classes
                .entry(row.kind.name().into())
                .or_default()
                .measured += 1;
            state.summary.measured += 1;
            on_event(Event::Measured {
                config: &kg.config,
                row: &row,
            });
            state.rows.push(row);
        }
        Ok(())
    }

    fn measure(&self, kg: &KernelGraph, round: u32, origin: Origin) -> Result<Row, ProfilerError> {
        let kernel = kg.config.to_string();
        let engine_error = |error| ProfilerError::Engine {
            kernel: kernel.clone(),
            error,
        };
        let seed = self.settings.seed;
        let bound = timing::Bound::new(self.engine, &kg.onnx(seed)?, &kg.inputs(seed)).map_err(engine_error)?;
        let t = timing::measure(|| bound.run(), self.settings.warmup, self.settings.reps).map_err(engine_error)?;
        let row = Row {
            kind: kg.config.kind,
            round,
            origin,
            features: kg.features.clone(),
            flops: kg.work.flops,
            bytes: kg.work.bytes,
            median_ms: t.median_ms,
            p10_ms: t.p10_ms,
            p90_ms: t.p90_ms,
            reps: t.reps,
            engine: self.engine.name().to_string(),
            threads: self.engine.threads(),
            cores: self.cores.clone(),
        };
        // What later rounds fit on must be what a resumed run reads back.
        Row::parse(&row.to_line()).map_err(|reason| ProfilerError::Setting {
            name: "csv",
            reason: format!("row of {kernel} does not read back: {reason}"),
        })
    }
}
