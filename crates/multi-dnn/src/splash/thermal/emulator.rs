//! Thermal ground truth where no sensor exists: a coupled RC model of the
//! device's processors (Splash §2, the Pixel 4's throttling), stepped at a
//! fixed sample period.
//!
//! Each processor `i` is one thermal node with heat capacity `C_i` (J/°C)
//! and resistance to ambient `R_i` (°C/W), coupled to its neighbours by
//! conductances `G_ij` (W/°C):
//!
//! `C_i dT_i/dt = P_i − (T_i − T_amb)/R_i − Σ_j G_ij (T_i − T_j)`
//!
//! with power `P_i = idle_w + busy · active_w · f²` (`busy` the share of the
//! sample the processor worked, `f` its relative frequency). Throttling has
//! hysteresis: a `slow` processor runs at `throttled_frequency` from when it
//! reaches `above_c` until it cools below `release_c`; an `off` processor
//! (NPU/DSP) is switched off over the same band.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What a processor does when it gets too hot.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", deny_unknown_fields)]
pub enum Throttle {
    /// Frequency drops to `frequency` (of nominal): latency rises by `1 / frequency`.
    Slow {
        above_c: f64,
        release_c: f64,
        frequency: f64,
    },
    /// The processor switches off (an outage) until it cools.
    Off { above_c: f64, release_c: f64 },
}

impl Throttle {
    /// The temperature above which it throttles.
    pub fn above_c(&self) -> f64 {
        match *self {
            Throttle::Slow { above_c, .. } | Throttle::Off { above_c, .. } => above_c,
        }
    }
}

/// One processor's thermal node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeParams {
    pub name: String,
    /// Heat capacity, J/°C.
    pub capacitance_j_per_c: f64,
    /// Thermal resistance to ambient, °C/W.
    pub resistance_c_per_w: f64,
    /// Power while idle, W.
    pub idle_w: f64,
    /// Extra power while busy at nominal frequency, W.
    pub active_w: f64,
    pub throttle: Option<Throttle>,
}

/// A device's thermal model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThermalParams {
    pub ambient_c: f64,
    pub nodes: Vec<NodeParams>,
    /// `(i, j, W/°C)`: heat flows between nodes `i` and `j` in proportion to
    /// their temperature difference.
    #[serde(default)]
    pub couplings: Vec<(usize, usize, f64)>,
    /// Where the figures come from.
    pub source: String,
}

#[derive(Debug, Error, PartialEq)]
pub enum ThermalError {
    #[error("thermal node `{node}`: {key} must be positive, got {value}")]
    NotPositive {
        node: String,
        key: &'static str,
        value: f64,
    },
    #[error("thermal node `{node}`: release_c {release} must be below above_c {above}")]
    Hysteresis { node: String, above: f64, release: f64 },
    #[error("thermal node `{node}`: throttled frequency {value} must lie in (0, 1]")]
    Frequency { node: String, value: f64 },
    #[error("thermal coupling ({i}, {j}): {reason}")]
    Coupling { i: usize, j: usize, reason: String },
    #[error("thermal step of {dt_ms} ms: the explicit update is stable only below {limit_ms:.3} ms")]
    Unstable { dt_ms: f64, limit_ms: f64 },
    #[error("temperature sensor: {reason}")]
    Sensor { reason: String },
}

impl From<ThermalError> for crate::core::SchedError {
    fn from(e: ThermalError) -> crate::core::SchedError {
        crate::core::SchedError::Thermal(e.to_string())
    }
}

impl ThermalParams {
    /// Checks every figure; errors name the node or coupling at fault.
    pub fn validate(&self) -> Result<(), ThermalError> {
        for n in &self.nodes {
            for (key, value) in [
                ("capacitance_j_per_c", n.capacitance_j_per_c),
                ("resistance_c_per_w", n.resistance_c_per_w),
            ] {
                if !(value > 0.0 && value.is_finite()) {
                    return Err(ThermalError::NotPositive {
                        node: n.name.clone(),
                        key,
                        value,
                    });
                }
            }
            let (above, release) = match n.throttle {
                Some(Throttle::Slow {
                    above_c,
                    release_c,
                    frequency,
                }) => {
                    if !(frequency > 0.0 && frequency <= 1.0) {
                        return Err(ThermalError::Frequency {
                            node: n.name.clone(),
                            value: frequency,
                        });
                    }
                    (above_c, release_c)
                }
                Some(Throttle::Off { above_c, release_c }) => (above_c, release_c),
                None => continue,
            };
            if release >= above {
                return Err(ThermalError::Hysteresis {
                    node: n.name.clone(),
                    above,
                    release,
                });
            }
        }
        for &(i, j, g) in &self.couplings {
            let reason = if i == j {
                Some("a node cannot couple to itself".to_string())
            } else if i.max(j) >= self.nodes.len() {
                Some(format!("there are {} nodes", self.nodes.len()))
            } else if !(g >= 0.0 && g.is_finite()) {
                Some(format!("conductance {g} must be non-negative"))
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(ThermalError::Coupling { i, j, reason });
            }
        }
        Ok(())
    }

    /// The largest step (ms) for which the explicit Euler update is stable.
    pub fn stable_step_ms(&self) -> f64 {
        (0..self.nodes.len())
            .map(|i| {
                let n = &self.nodes[i];
                let g: f64 = 1.0 / n.resistance_c_per_w + self.conductances_of(i);
                1e3 * n.capacitance_j_per_c / g
            })
            .fold(f64::INFINITY, f64::min)
    }

    fn conductances_of(&self, i: usize) -> f64 {
        self.couplings
            .iter()
            .filter(|c| c.0 == i || c.1 == i)
            .map(|c| c.2)
            .sum()
    }
}

/// The emulated device: temperatures, frequencies and throttling state.
#[derive(Clone, Debug)]
pub struct ThermalEmulator {
    params: ThermalParams,
    temps: Vec<f64>,
    throttled: Vec<bool>,
    now_ms: f64,
    /// [`ThermalParams::stable_step_ms`], computed once.
    limit_ms: f64,
}

impl ThermalEmulator {
    /// Starts every node at ambient temperature, nothing throttled.
    pub fn new(params: ThermalParams) -> Result<ThermalEmulator, ThermalError> {
        params.validate()?;
        let n = params.nodes.len();
        Ok(ThermalEmulator {
            temps: vec![params.ambient_c; n],
            throttled: vec![false; n],
            now_ms: 0.0,
            limit_ms: params.stable_step_ms(),
            params,
        })
    }

    pub fn params(&self) -> &ThermalParams {
        &self.params
    }

    pub fn now_ms(&self) -> f64 {
        self.now_ms
    }

    /// Temperatures, °C, per node.
    pub fn temps(&self) -> &[f64] {
        &self.temps
    }

    /// Relative frequency of `node` now (1 nominal; 0 when switched off).
    pub fn frequency(&self, node: usize) -> f64 {
        match (self.throttled[node], self.params.nodes[node].throttle) {
            (true, Some(Throttle::Slow { frequency, .. })) => frequency,
            (true, Some(Throttle::Off { .. })) => 0.0,
            _ => 1.0,
        }
    }

    /// Relative frequency of every node.
    pub fn frequencies(&self) -> Vec<f64> {
        (0..self.temps.len()).map(|i| self.frequency(i)).collect()
    }

    /// False while `node` is switched off by its throttle.
    pub fn available(&self, node: usize) -> bool {
        self.frequency(node) > 0.0
    }

    /// Factor by which work on `node` takes longer than at nominal frequency
    /// (infinite while it is off).
    pub fn latency_factor(&self, node: usize) -> f64 {
        1.0 / self.frequency(node)
    }

    /// Advances by `dt_ms`, each node busy for the share `busy[i]` (0-1) of
    /// it, then updates throttling. Fails when `dt_ms` is beyond the stable step.
    pub fn step(&mut self, dt_ms: f64, busy: &[f64]) -> Result<(), ThermalError> {
        if dt_ms >= self.limit_ms {
            return Err(ThermalError::Unstable {
                dt_ms,
                limit_ms: self.limit_ms,
            });
        }
        let dt = dt_ms / 1e3;
        let amb = self.params.ambient_c;
        let mut flow: Vec<f64> = (0..self.temps.len())
            .map(|i| {
                let n = &self.params.nodes[i];
                let f = self.frequency(i);
                let b = busy.get(i).copied().unwrap_or(0.0).clamp(0.0, 1.0);
                let power = if f > 0.0 {
                    n.idle_w + b * n.active_w * f * f
                } else {
                    0.0
                };
                power - (self.temps[i] - amb) / n.resistance_c_per_w
            })
            .collect();
        for &(i, j, g) in &self.params.couplings {
            let q = g * (self.temps[i] - self.temps[j]);
            flow[i] -= q;
            flow[j] += q;
        }
        for (i, q) in flow.into_iter().enumerate() {
            self.temps[i] += dt * q / self.params.nodes[i].capacitance_j_per_c;
        }
        for i in 0..self.temps.len() {
            let (above, release) = match self.params.nodes[i].throttle {
                Some(Throttle::Slow { above_c, release_c, .. }) | Some(Throttle::Off { above_c, release_c }) => {
                    (above_c, release_c)
                }
                None => continue,
            };
            if self.temps[i] >= above {
                self.throttled[i] = true;
            } else if self.temps[i] < release {
                self.throttled[i] = false;
            }
        }
        self.now_ms += dt_ms;
        Ok(())
    }

    /// Runs `ms` in steps of at most `sample_ms` with the same busy shares.
    pub fn advance(&mut self, ms: f64, sample_ms: f64, busy: &[f64]) -> Result<(), ThermalError> {
        let mut left = ms;
        while left > 1e-12 {
            let dt = left.min(sample_ms);
            self.step(dt, busy)?;
            left -= dt;
        }
        Ok(())
    }
}

/// A four-processor phone-like device for tests and benchmarks: CPU, GPU
/// (slow down at 49 °C), DSP, NPU (off at 51 °C), the CPU coupled to the
/// GPU and DSP. Illustrative figures, not any device's measurements.
pub fn illustrative_phone() -> ThermalParams {
    let node = |name: &str, c: f64, r: f64, active: f64, throttle| NodeParams {
        name: name.into(),
        capacitance_j_per_c: c,
        resistance_c_per_w: r,
        idle_w: 0.05,
        active_w: active,
        throttle,
    };
    let slow = Some(Throttle::Slow {
        above_c: 49.0,
        release_c: 47.0,
        frequency: 0.6,
    });
    let off = Some(Throttle::Off {
        above_c: 51.0,
        release_c: 48.0,
    });
    ThermalParams {
        ambient_c: 25.0,
        nodes: vec![
            node("cpu", 2.0, 12.0, 4.5, slow),
            node("gpu", 2.0, 12.0, 1.5, slow),
            node("dsp", 1.5, 15.0, 0.8, off),
            node("npu", 1.5, 15.0, 0.3, off),
        ],
        couplings: vec![(0, 1, 0.05), (0, 2, 0.03), (2, 3, 0.02)],
        source: "illustrative figures, not measured".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phone() -> ThermalParams {
        illustrative_phone()
    }

    #[test]
    fn busy_heats_idle_cools_and_coupling_spreads() {
        let mut e = ThermalEmulator::new(phone()).unwrap();
        e.advance(20_000.0, 1.0, &[1.0, 0.0, 0.0, 0.0]).unwrap();
        let hot = e.temps().to_vec();
        assert!(hot[0] > 40.0, "{hot:?}");
        assert!(
            hot[1] > 25.5 && hot[1] < hot[0],
            "the GPU warms through the coupling: {hot:?}"
        );
        e.advance(60_000.0, 1.0, &[0.0; 4]).unwrap();
        assert!(e.temps()[0] < hot[0] - 10.0, "{:?}", e.temps());
    }

    #[test]
    fn steady_state_is_power_times_resistance() {
        let mut p = phone();
        p.couplings.clear();
        let mut e = ThermalEmulator::new(p).unwrap();
        e.advance(400_000.0, 5.0, &[0.0, 1.0, 0.0, 0.0]).unwrap();
        let expected = 25.0 + (0.05 + 1.5) * 12.0;
        assert!((e.temps()[1] - expected).abs() < 0.05, "{} vs {expected}", e.temps()[1]);
    }

    #[test]
    fn throttling_has_hysteresis() {
        let mut e = ThermalEmulator::new(phone()).unwrap();
        let mut t = 0.0;
        while e.frequency(0) == 1.0 {
            e.step(1.0, &[1.0, 0.0, 0.0, 0.0]).unwrap();
            t += 1.0;
            assert!(t < 600_000.0, "never throttled: {:?}", e.temps());
        }
        assert!(e.temps()[0] >= 49.0 && e.latency_factor(0) > 1.6);
        e.step(1.0, &[0.0; 4]).unwrap();
        assert!(
            e.temps()[0] > 47.0 && e.frequency(0) < 1.0,
            "still throttled inside the band"
        );
        while e.frequency(0) < 1.0 {
            e.step(1.0, &[0.0; 4]).unwrap();
        }
        assert!(e.temps()[0] < 47.0);
    }

    #[test]
    fn an_off_processor_is_unavailable_until_it_cools() {
        let mut p = phone();
        p.nodes[3].active_w = 3.0;
        let mut e = ThermalEmulator::new(p).unwrap();
        while e.available(3) {
            e.step(2.0, &[0.0, 0.0, 0.0, 1.0]).unwrap();
            assert!(e.now_ms() < 600_000.0);
        }
        assert!(e.latency_factor(3).is_infinite());
        let off_at = e.temps()[3];
        while !e.available(3) {
            e.step(2.0, &[0.0, 0.0, 0.0, 1.0]).unwrap();
        }
        assert!(off_at >= 51.0 && e.temps()[3] < 48.0);
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut p = phone();
        p.nodes[2].resistance_c_per_w = 0.0;
        assert!(
            matches!(ThermalEmulator::new(p).unwrap_err(), ThermalError::NotPositive { node, .. } if node == "dsp")
        );
        let mut p = phone();
        p.nodes[0].throttle = Some(Throttle::Off {
            above_c: 49.0,
            release_c: 50.0,
        });
        assert!(ThermalEmulator::new(p).unwrap_err().to_string().contains("`cpu`"));
        let mut p = phone();
        p.couplings.push((1, 7, 0.1));
        assert!(ThermalEmulator::new(p).unwrap_err().to_string().contains("4 nodes"));
        let mut e = ThermalEmulator::new(phone()).unwrap();
        assert!(matches!(e.step(1e6, &[]), Err(ThermalError::Unstable { .. })));
    }
}
