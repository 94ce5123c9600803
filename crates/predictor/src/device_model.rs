//! [`DeviceModel`]: the latency model a device profile describes, with the
//! per-kernel regressors it names where there are any and the analytic model
//! everywhere else.

use crate::calibration::Calibration;
use crate::fit::{KernelRegressors, RegressorError};
use crate::model::{AnalyticModel, LatencyModel, PredictError, Prediction, Source};
use crate::profile::DeviceProfile;
use graph_ir::{Graph, NodeId};
use std::collections::BTreeMap;
use std::path::Path;

/// Regressors for one processor and the file they came from.
struct Attached {
    regressors: KernelRegressors,
    file: String,
}

/// A device's latency model: per-kernel regressors where the profile (or
/// [`DeviceModel::attach`]) provides them, the analytic model otherwise.
/// Each kernel's [`Source`] says which made its figure.
pub struct DeviceModel {
    analytic: AnalyticModel,
    /// The analytic model with every processor at its rated precision:
    /// regressors describe kernels at that precision, and a processor
    /// running another is priced at the analytic ratio between the two.
    rated: AnalyticModel,
    attached: BTreeMap<String, Attached>,
    /// Per processor and precision other than its rated one: regressors
    /// fitted on kernels run at that precision.
    attached_at: BTreeMap<(String, crate::Precision), Attached>,
    /// Per processor: its in-model calibration and the file it came from.
    calibrated: BTreeMap<String, (Calibration, String)>,
}

impl DeviceModel {
    /// The analytic model alone.
    pub fn analytic(profile: DeviceProfile) -> DeviceModel {
        let mut rated = profile.clone();
        rated.processors.values_mut().for_each(|p| p.precision = None);
        DeviceModel {
            analytic: AnalyticModel::new(profile),
            rated: AnalyticModel::new(rated),
            attached: BTreeMap::new(),
            attached_at: BTreeMap::new(),
            calibrated: BTreeMap::new(),
        }
    }

    /// Loads the profile (the `per_cpu` file for this machine's CPU where
    /// it names one) and every `regressors` and `calibration` file it names
    /// (relative to the folder of the profile file read).
    pub fn load(path: &Path) -> Result<DeviceModel, PredictError> {
        let profile = DeviceProfile::load(path)?;
        let dir = profile.file_read(path).parent().unwrap_or(Path::new("")).to_path_buf();
        let named: Vec<(String, String)> = profile
            .processors
            .iter()
            .filter_map(|(name, p)| p.regressors.clone().map(|f| (name.clone(), f)))
            .collect();
        let calibrations: Vec<(String, String)> = profile
            .processors
            .iter()
            .filter_map(|(name, p)| p.calibration.clone().map(|f| (name.clone(), f)))
            .collect();
        let at: Vec<(String, crate::Precision, String)> = profile
            .processors
            .iter()
            .flat_map(|(name, p)| p.regressors_at.iter().map(|(q, f)| (name.clone(), *q, f.clone())))
            .collect();
        let mut model = DeviceModel::analytic(profile);
        for (processor, file) in named {
            model.attach(&processor, &dir.join(file))?;
        }
        for (processor, precision, file) in at {
            model.attach_at(&processor, precision, &dir.join(file))?;
        }
        for (processor, file) in calibrations {
            model.calibrate(&processor, &dir.join(file))?;
        }
        Ok(model)
    }

    /// Uses the regressors in `file` for `processor` (replacing any it
    /// had); refused unless fitted at the processor's rated precision.
    pub fn attach(&mut self, processor: &str, file: &Path) -> Result<(), PredictError> {
        let rated = self.analytic.profile.processor(processor)?.rated();
        let regressors = KernelRegressors::load_at(file, rated)?;
        self.attached.insert(
            processor.to_string(),
            Attached {
                regressors,
                file: file.display().to_string(),
            },
        );
        Ok(())
    }

    /// Uses the regressors in `file`, fitted on kernels run at `precision`,
    /// for `processor` while it runs `precision` (replacing any it had).
    pub fn attach_at(&mut self, processor: &str, precision: crate::Precision, file: &Path) -> Result<(), PredictError> {
        self.analytic.profile.processor(processor)?;
        let regressors = KernelRegressors::load_at(file, precision)?;
        self.attached_at.insert(
            (processor.to_string(), precision),
            Attached {
                regressors,
                file: file.display().to_string(),
            },
        );
        Ok(())
    }

    /// Applies the calibration in `file` to `processor`'s predictions
    /// (replacing any it had).
    pub fn calibrate(&mut self, processor: &str, file: &Path) -> Result<(), PredictError> {
        self.analytic.profile.processor(processor)?;
        let c = Calibration::load(file).map_err(|e| PredictError::Calibration(Box::new(e)))?;
        self.calibrated
            .insert(processor.to_string(), (c, file.display().to_string()));
        Ok(())
    }

    /// Runs `processor` at `precision` ([`DeviceProfile::set_precision`]).
    pub fn set_precision(&mut self, processor: &str, precision: crate::Precision) -> Result<(), PredictError> {
        Ok(self.analytic.profile.set_precision(processor, precision)?)
    }

    /// Drops every regressor and calibration: predictions come from the
    /// analytic model only.
    pub fn without_regressors(mut self) -> DeviceModel {
        self.attached.clear();
        self.attached_at.clear();
        self.calibrated.clear();
        self
    }

    /// Drops every calibration (regressors stay).
    pub fn without_calibration(mut self) -> DeviceModel {
        self.calibrated.clear();
        self
    }

    pub fn profile(&self) -> &DeviceProfile {
        &self.analytic.profile
    }

    /// The summary of repeated runs `processor`'s regressors were fitted to
    /// (the median where it has none): what its predictions estimate.
    pub fn statistic(&self, processor: &str) -> crate::profiler::timing::Statistic {
        self.attached
            .get(processor)
            .map(|a| a.regressors.statistic)
            .unwrap_or_default()
    }
}

impl From<RegressorError> for PredictError {
    fn from(e: RegressorError) -> PredictError {
        PredictError::Regressors(Box::new(e))
    }
}

impl LatencyModel for DeviceModel {
    fn device(&self) -> &str {
        self.analytic.device()
    }

    fn processors(&self) -> Vec<String> {
        self.analytic.processors()
    }

    fn predict(&self, g: &Graph, nodes: &[NodeId], processor: &str) -> Result<Prediction, PredictError> {
        let mut prediction = self.uncalibrated(g, nodes, processor)?;
        if let Some((c, file)) = self.calibrated.get(processor) {
            c.apply(&mut prediction);
            prediction.calibration = Some(file.clone());
        }
        Ok(prediction)
    }

    fn comm_ms(&self, from: &str, to: &str, bytes: u64) -> Result<f64, PredictError> {
        self.analytic.comm_ms(from, to, bytes)
    }
}

impl DeviceModel {
    /// The prediction of the regressors and the analytic model, before any
    /// calibration.
    fn uncalibrated(&self, g: &Graph, nodes: &[NodeId], processor: &str) -> Result<Prediction, PredictError> {
        let mut prediction = self.analytic.predict(g, nodes, processor)?;
        let p = self.analytic.profile.processor(processor)?;
        let precision = p.precision();
        let (a, at_precision) = match self.attached_at.get(&(processor.to_string(), precision)) {
            Some(a) => (a, true),
            None => match self.attached.get(processor) {
                Some(a) => (a, false),
                None => return Ok(prediction),
            },
        };
        let factors: Option<Vec<f64>> = if precision != p.rated() && !at_precision {
            let base = self.rated.predict(g, nodes, processor)?;
            Some(
                prediction
                    .kernels
                    .iter()
                    .zip(&base.kernels)
                    .map(|(k, b)| k.ms / b.ms.max(1e-12))
                    .collect(),
            )
        } else {
            None
        };
        for (i, k) in prediction.kernels.iter_mut().enumerate() {
            if let Some(ms) = a.regressors.predict(k.class, &k.features) {
                let ms = ms.map_err(|e| {
                    PredictError::Regressors(Box::new(RegressorError::Forest {
                        path: a.file.clone().into(),
                        class: k.class.name().into(),
                        error: e,
                    }))
                })?;
                let factor = factors.as_ref().map_or(1.0, |f| f[i]);
                match a.regressors.beyond_range(k.class, &k.features) {
                    Some(feature) => {
                        k.ms = (ms * factor).max(k.floor_ms);
                        k.source = Source::Extrapolated {
                            file: a.file.clone(),
                            feature: feature.into(),
                        };
                    }
                    None if factors.is_some() => {
                        k.ms = ms * factor;
                        k.source = Source::Scaled {
                            file: a.file.clone(),
                            precision,
                        };
                    }
                    None => {
                        k.ms = ms;
                        k.source = Source::Regressor { file: a.file.clone() };
                    }
                }
            }
        }
        prediction.total_ms = prediction.subgraph_overhead_ms + prediction.kernels.iter().map(|k| k.ms).sum::<f64>();
        Ok(prediction)
    }
}
