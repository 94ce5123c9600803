//! A thermal run beside a driver (the simulator, or `serve`'s clock): the
//! emulator stepped at its sample period with each worker's busy state,
//! throttling turned into slow-downs and outages, and what the scheduler
//! learns from every finished subgraph (the online thermal model, latency
//! per temperature bin). One node per worker, in the workers' order.

use crate::splash::thermal::emulator::{ThermalEmulator, ThermalError, ThermalParams};
use crate::splash::thermal::latency_bins::LatencyBins;
use crate::splash::thermal::online::OnlineThermalModel;
use crate::splash::thermal::sensor::TemperatureSensor;
use crate::splash::thermal::{Snapshot, ThermalOracle};

/// A throttling state that changed at the time [`ThermalDriver::advance_until`] stopped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    /// The worker now runs at this share of its frequency (1 = restored).
    Frequency { worker: usize, frequency: f64 },
    /// The worker switched off (true) or came back (false).
    Off { worker: usize, off: bool },
}

/// Per worker: what ran on it and how its temperature moved.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct WorkerHeat {
    pub name: String,
    pub inferences: u64,
    pub busy_ms: f64,
    /// Sum over its subgraphs of the temperature after minus before, °C.
    pub rise_c: f64,
    pub peak_c: f64,
    /// Ms spent throttled (slowed or off).
    pub throttled_ms: f64,
    /// When it first throttled.
    pub first_throttle_ms: Option<f64>,
}

impl WorkerHeat {
    /// Splash's performance per temperature over a run of `run_ms` on a
    /// device at `ambient_c`: subgraphs it ran per second over its peak
    /// rise above ambient (FPS / °C, Table 2.2); `None` without runs or
    /// without a rise.
    pub fn ppt(&self, run_ms: f64, ambient_c: f64) -> Option<f64> {
        let rise = self.peak_c - ambient_c;
        if self.inferences == 0 || rise <= 0.0 || run_ms <= 0.0 {
            return None;
        }
        Some(self.inferences as f64 * 1e3 / run_ms / rise)
    }
}

/// A real sensor read in place of the emulator for some workers.
struct Sensed {
    sensor: Box<dyn TemperatureSensor + Send>,
    /// Per worker, its index among the sensor's readings.
    index: Vec<Option<usize>>,
}

/// The emulator (or, for the workers a real sensor covers, that sensor),
/// the models learnt online and the run's thermal record. A sensed
/// worker's throttling is its device's own: the driver slows or switches
/// off only emulated workers, and records when a sensed one passed its
/// throttling threshold.
pub struct ThermalDriver {
    emu: ThermalEmulator,
    sensed: Option<Sensed>,
    /// Every worker's temperature now: sensed where a sensor covers it.
    temps: Vec<f64>,
    model: OnlineThermalModel,
    bins: LatencyBins,
    /// Temperatures and frequencies when each worker's running subgraph started.
    started: Vec<Option<(Vec<f64>, Vec<f64>)>>,
    freqs: Vec<f64>,
    pub heat: Vec<WorkerHeat>,
}

impl ThermalDriver {
    /// Splash samples temperatures every 1 ms.
    pub const SAMPLE_MS: f64 = 1.0;

    pub fn new(params: ThermalParams) -> Result<ThermalDriver, ThermalError> {
        let n = params.nodes.len();
        let heat = params
            .nodes
            .iter()
            .map(|p| WorkerHeat {
                name: p.name.clone(),
                peak_c: params.ambient_c,
                ..WorkerHeat::default()
            })
            .collect();
        let limit_ms = params.stable_step_ms();
        if Self::SAMPLE_MS >= limit_ms {
            return Err(ThermalError::Unstable {
                dt_ms: Self::SAMPLE_MS,
                limit_ms,
            });
        }
        let emu = ThermalEmulator::new(params)?;
        Ok(ThermalDriver {
            freqs: emu.frequencies(),
            temps: emu.temps().to_vec(),
            sensed: None,
            emu,
            model: OnlineThermalModel::new(n, OnlineThermalModel::DEFAULT_WINDOW),
            bins: LatencyBins::default(),
            started: vec![None; n],
            heat,
        })
    }

    pub fn now_ms(&self) -> f64 {
        self.emu.now_ms()
    }

    pub fn temps(&self) -> &[f64] {
        &self.temps
    }

    /// Reads `sensor` instead of the emulator for the workers `index`
    /// maps to one of its readings (others stay emulated); reads it once
    /// now, so that a sensor that fails does so before the run.
    pub fn set_sensor(
        &mut self,
        sensor: Box<dyn TemperatureSensor + Send>,
        index: Vec<Option<usize>>,
    ) -> Result<(), String> {
        self.sensed = Some(Sensed { sensor, index });
        self.read_sensor()?;
        for (h, t) in self.heat.iter_mut().zip(&self.temps) {
            h.peak_c = *t;
        }
        Ok(())
    }

    /// Names of the workers a real sensor covers.
    pub fn sensed_workers(&self) -> Vec<&str> {
        let Some(s) = &self.sensed else { return Vec::new() };
        s.index
            .iter()
            .zip(&self.heat)
            .filter(|(i, _)| i.is_some())
            .map(|(_, h)| h.name.as_str())
            .collect()
    }

    fn read_sensor(&mut self) -> Result<(), String> {
        self.temps.copy_from_slice(self.emu.temps());
        let Some(s) = self.sensed.as_mut() else { return Ok(()) };
        let read = s.sensor.read_c()?;
        for (w, i) in s.index.iter().enumerate() {
            if let Some(&t) = i.and_then(|i| read.get(i)) {
                self.temps[w] = t;
            }
        }
        Ok(())
    }

    fn is_sensed(&self, w: usize) -> bool {
        self.sensed.as_ref().is_some_and(|s| s.index[w].is_some())
    }

    pub fn ambient_c(&self) -> f64 {
        self.emu.params().ambient_c
    }

    /// Whether some worker is switched off now.
    pub fn any_off(&self) -> bool {
        self.freqs.contains(&0.0)
    }

    /// Steps the emulator towards `target_ms` with each worker busy or not,
    /// stopping early at the first sample where a throttling state changes.
    /// Returns where it stopped and the changes there.
    pub fn advance_until(&mut self, target_ms: f64, busy: &[bool]) -> Result<(f64, Vec<Change>), ThermalError> {
        let shares: Vec<f64> = busy.iter().map(|b| if *b { 1.0 } else { 0.0 }).collect();
        let stepped = self.emu.now_ms() < target_ms - 1e-9;
        while self.emu.now_ms() < target_ms - 1e-9 {
            let dt = (target_ms - self.emu.now_ms()).min(Self::SAMPLE_MS);
            self.emu.step(dt, &shares)?;
            let now = self.emu.now_ms();
            let sensed = self.sensed.as_ref().map(|s| &s.index);
            for (w, h) in self.heat.iter_mut().enumerate() {
                if sensed.is_some_and(|i| i[w].is_some()) {
                    continue;
                }
                h.peak_c = h.peak_c.max(self.emu.temps()[w]);
                if self.freqs[w] < 1.0 {
                    h.throttled_ms += dt;
                }
            }
            let mut freqs = self.emu.frequencies();
            for (w, f) in freqs.iter_mut().enumerate() {
                if self.is_sensed(w) {
                    *f = 1.0;
                }
            }
            if freqs != self.freqs {
                let changes = self.changes(&freqs, now);
                self.freqs = freqs;
                self.temps.copy_from_slice(self.emu.temps());
                return Ok((now, changes));
            }
        }
        if stepped && self.sensed.is_some() {
            self.read_sensor().map_err(|reason| ThermalError::Sensor { reason })?;
            let now = self.emu.now_ms();
            for w in 0..self.temps.len() {
                if !self.is_sensed(w) {
                    continue;
                }
                let t = self.temps[w];
                let h = &mut self.heat[w];
                h.peak_c = h.peak_c.max(t);
                let above = self.emu.params().nodes[w].throttle.is_some_and(|th| t > th.above_c());
                if above && h.first_throttle_ms.is_none() {
                    h.first_throttle_ms = Some(now);
                }
            }
        } else {
            self.temps.copy_from_slice(self.emu.temps());
        }
        Ok((self.emu.now_ms(), Vec::new()))
    }

    fn changes(&mut self, freqs: &[f64], now: f64) -> Vec<Change> {
        let mut out = Vec::new();
        for (w, (&old, &new)) in self.freqs.iter().zip(freqs).enumerate() {
            if old == new {
                continue;
            }
            if new < 1.0 && self.heat[w].first_throttle_ms.is_none() {
                self.heat[w].first_throttle_ms = Some(now);
            }
            if new == 0.0 || old == 0.0 {
                out.push(Change::Off {
                    worker: w,
                    off: new == 0.0,
                });
            } else {
                out.push(Change::Frequency {
                    worker: w,
                    frequency: new,
                });
            }
        }
        out
    }

    /// How much longer work started on `worker` now takes than at nominal
    /// frequency (the frequency when it starts holds for the whole subgraph).
    pub fn latency_factor(&self, worker: usize) -> f64 {
        1.0 / self.freqs[worker].max(1e-9)
    }

    /// A subgraph starts on `worker` now.
    pub fn started(&mut self, worker: usize) {
        self.started[worker] = Some((self.temps.clone(), self.freqs.clone()));
    }

    /// The subgraph running on `worker` was abandoned: nothing is learnt from it.
    pub fn abandoned(&mut self, worker: usize) {
        self.started[worker] = None;
    }

    /// Makes `worker` the cloud worker over a link of `link_mbps` (its
    /// thermal model takes Eq. 4.5's features).
    pub fn set_cloud(&mut self, worker: usize, link_mbps: f64) {
        self.model.set_cloud(worker, link_mbps);
    }

    /// The subgraph `candidate` of `model` on `worker`, reading and writing
    /// `io` bytes, ended after `ms`.
    pub fn finished(&mut self, worker: usize, (model, candidate): (usize, usize), io: (u64, u64), ms: f64) {
        let Some((temps, freqs)) = self.started[worker].take() else {
            return;
        };
        let after = self.temps[worker];
        self.model.observe(worker, (&temps, &freqs), ms, io, after);
        self.bins.observe(model, candidate, worker, temps[worker], ms);
        let h = &mut self.heat[worker];
        h.inferences += 1;
        h.busy_ms += ms;
        h.rise_c += after - temps[worker];
    }

    /// What policies see now.
    pub fn oracle(&self) -> impl ThermalOracle + '_ {
        Snapshot {
            model: &self.model,
            temps: &self.temps,
            freqs: &self.freqs,
            bins: Some(&self.bins),
        }
    }

    /// The earliest time any worker throttled.
    pub fn first_throttle_ms(&self) -> Option<f64> {
        self.heat
            .iter()
            .filter_map(|h| h.first_throttle_ms)
            .min_by(f64::total_cmp)
    }

    /// The run in a line, labelled `label`: when it first throttled and
    /// each processor's busy time, peak temperature and PPT.
    pub fn summary(&self, label: &str) -> String {
        let run_ms = self.now_ms();
        let workers: Vec<String> = self
            .heat
            .iter()
            .map(|h| {
                format!(
                    "{} {:.0}% busy, peak {:.1} °C, PPT {}",
                    h.name,
                    100.0 * h.busy_ms / run_ms.max(1.0),
                    h.peak_c,
                    h.ppt(run_ms, self.ambient_c())
                        .map_or("-".into(), |p| format!("{p:.1}"))
                )
            })
            .collect();
        let sensed = self.sensed_workers();
        let source = if sensed.is_empty() {
            "emulated".to_string()
        } else {
            format!("sensed: {}; others emulated", sensed.join(", "))
        };
        let throttled = self.first_throttle_ms().map_or("never throttled".to_string(), |t| {
            format!("first throttled at {:.1} s", t / 1e3)
        });
        format!("thermal ({source}) [{label}]: {throttled}; {}", workers.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::splash::thermal::emulator::illustrative_phone;

    /// A sensor that always reads the same temperatures.
    struct Fixed(Vec<f64>);

    impl TemperatureSensor for Fixed {
        fn read_c(&mut self) -> Result<Vec<f64>, String> {
            Ok(self.0.clone())
        }
    }

    /// A sensed worker's record is its sensor's: its emulated node heating
    /// under load changes neither its temperature, nor its peak, nor its
    /// frequency; the emulated workers beside it heat as before.
    #[test]
    fn a_sensed_worker_keeps_its_sensors_readings() {
        let mut d = ThermalDriver::new(illustrative_phone()).unwrap();
        d.set_sensor(Box::new(Fixed(vec![31.0])), vec![Some(0), None, None, None])
            .unwrap();
        let busy = [true, true, false, false];
        let (stop, changes) = d.advance_until(600_000.0, &busy).unwrap();
        assert_eq!(stop, 600_000.0, "the sensed CPU is never slowed: {changes:?}");
        assert_eq!(d.temps()[0], 31.0);
        assert_eq!(d.heat[0].peak_c, 31.0);
        assert_eq!(d.heat[0].throttled_ms, 0.0);
        assert!(d.heat[1].peak_c > 30.0, "{:?}", d.heat[1]);
        assert_eq!(d.sensed_workers(), vec!["cpu"]);
    }

    #[test]
    fn stops_where_throttling_changes_and_learns_from_runs() {
        let mut d = ThermalDriver::new(illustrative_phone()).unwrap();
        let busy = [true, false, false, false];
        let (stop, changes) = d.advance_until(600_000.0, &busy).unwrap();
        assert!(stop < 600_000.0, "the CPU throttles before 10 minutes at full load");
        assert_eq!(
            changes,
            vec![Change::Frequency {
                worker: 0,
                frequency: 0.6
            }]
        );
        assert_eq!(d.first_throttle_ms(), Some(stop));
        assert!((d.latency_factor(0) - 1.0 / 0.6).abs() < 1e-12);
        let mut d = ThermalDriver::new(illustrative_phone()).unwrap();
        d.started(0);
        let at = d.temps()[0];
        d.advance_until(20.0, &busy).unwrap();
        d.finished(0, (0, 0), (0, 0), 20.0);
        assert_eq!(d.heat[0].inferences, 1);
        assert!(d.heat[0].ppt(20.0, 25.0).is_some());
        assert_eq!(d.bins.predict(0, 0, 0, at), Some(20.0));
        d.started(1);
        d.abandoned(1);
        assert_eq!(d.heat[1].inferences, 0, "an abandoned run teaches nothing");
    }
}
