//! Reading a workload file: the TOML layout (`File` and its parts) and
//! its conversion into a checked [`Workload`], every error naming the file
//! and key at fault.

use crate::core::workload::*;
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenderFile {
    processor: String,
    fps: f64,
    render_ms: f64,
    margin_ms: Option<f64>,
    offload_to: Option<String>,
    offload_margin: Option<f64>,
    offload_cycle_s: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UtilityFile {
    l0: Option<f64>,
    beta: Option<f64>,
    gamma: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FramesFile {
    variation: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    seed: Option<u64>,
    duration_s: Option<f64>,
    requests: Option<usize>,
    slo_multiplier: Option<f64>,
    #[serde(default)]
    app: Vec<AppFile>,
    #[serde(default)]
    outage: Vec<OutageFile>,
    render: Option<RenderFile>,
    #[serde(default)]
    group: Vec<crate::core::groups::GroupFile>,
    camera: Option<CameraFile>,
    drop_late: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CameraFile {
    fps: f64,
    slo_ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AppFile {
    name: Option<String>,
    model: String,
    random_weights: Option<u64>,
    arrival: String,
    fps: Option<f64>,
    rate: Option<f64>,
    per_frame: Option<usize>,
    slo_ms: Option<f64>,
    slo_multiplier: Option<f64>,
    processor: Option<String>,
    utility: Option<UtilityFile>,
    frames: Option<FramesFile>,
    frames_dir: Option<String>,
    group: Option<String>,
    after: Option<String>,
    input_shape: Option<String>,
    scale_like: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutageFile {
    processor: String,
    at_s: f64,
    for_s: f64,
}

/// The highest arrival rate an app, the camera (frames, and frame
/// requests) or the render task may ask, per second. With
/// [`MAX_REQUESTS`] and the policies' window of the queue
/// ([`crate::core::QUEUE_WINDOW`]) it bounds a simulation's work: at most
/// `MAX_REQUESTS` rate-driven requests, each decision over at most
/// `QUEUE_WINDOW` queued tasks.
pub const MAX_RATE_HZ: f64 = 10_000.0;

/// The most requests a workload's rates may ask over its duration.
pub const MAX_REQUESTS: f64 = 5_000_000.0;

impl Workload {
    /// Reads and validates `path`; model paths are resolved against its folder.
    pub fn load(path: &Path) -> Result<Workload, WorkloadError> {
        let file = path.display().to_string();
        let err = |key: &str, reason: String| WorkloadError {
            file: file.clone(),
            key: key.to_string(),
            reason,
        };
        let text = graph_ir::plain_file::read_plain_text(path, graph_ir::plain_file::MAX_CONFIG_BYTES)
            .map_err(|e| err("", e.reason()))?;
        let parsed: File = toml::from_str(&text).map_err(|e| {
            let line = scheduler_rt::toml_line(&text, &e).unwrap_or(0);
            err(&format!("line {line}"), e.message().to_string())
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut w = Self::build(parsed, dir, &err)?;
        w.file = file;
        Ok(w)
    }

    fn build(f: File, dir: &Path, err: &dyn Fn(&str, String) -> WorkloadError) -> Result<Workload, WorkloadError> {
        let c = Check { err };
        if let Some(d) = f.duration_s {
            c.positive("duration_s", d)?;
        }
        if f.duration_s.is_none() && f.requests.is_none() {
            return Err(err("duration_s", "give duration_s or requests".into()));
        }
        if let Some(n) = f.requests
            && !(1.0..=MAX_REQUESTS).contains(&(n as f64))
        {
            return Err(err(
                "requests",
                format!("must be between 1 and the {MAX_REQUESTS} a run may hold, got {n}"),
            ));
        }
        if let Some(m) = f.slo_multiplier {
            c.positive("slo_multiplier", m)?;
        }
        if f.app.is_empty() {
            return Err(err("app", "the workload has no [[app]]".into()));
        }
        let groups = crate::core::groups::parse(f.group, err)?;
        let camera_given = f.camera.is_some();
        let mut apps = Vec::new();
        for (i, a) in f.app.into_iter().enumerate() {
            let app = c.app(i, a, &apps, &groups, camera_given, f.slo_multiplier, dir)?;
            apps.push(app);
        }
        let outages = c.outages(f.outage)?;
        let render = f.render.map(|r| c.render(r)).transpose()?;
        let camera = f.camera.map(|cam| c.camera(cam, &apps)).transpose()?;
        let w = Workload {
            camera,
            drop_late: f.drop_late.unwrap_or(false),
            file: String::new(),
            seed: f.seed.unwrap_or(0),
            duration_s: f.duration_s,
            requests: f.requests,
            apps,
            outages,
            render,
            groups,
        };
        if let Some(d) = f.duration_s {
            w.check_requests(d).map_err(|reason| err("duration_s", reason))?;
        }
        Ok(w)
    }

    /// Requests per second the rate-driven arrivals ask: periodic, paced
    /// and Poisson apps, the camera's frames times the requests each frame
    /// sends, and one per period of every group whose period is known.
    pub fn requests_per_s(&self) -> f64 {
        let apps: f64 = self
            .apps
            .iter()
            .map(|a| match a.arrival {
                Arrival::Periodic { fps } | Arrival::Paced { fps } => fps,
                Arrival::Poisson { rate } => rate,
                Arrival::Group { group } => self.groups[group].period_ms.map_or(0.0, |p| 1e3 / p),
                Arrival::Closed | Arrival::Frame { .. } => 0.0,
            })
            .sum();
        apps + self.camera.map_or(0.0, |c| c.fps * per_frame(&self.apps))
    }

    /// Refuses a duration over which the rates would ask more than
    /// [`MAX_REQUESTS`] requests.
    fn check_requests(&self, duration_s: f64) -> Result<(), String> {
        let n = self.requests_per_s() * duration_s;
        if n > MAX_REQUESTS {
            return Err(format!(
                "the apps' rates ask about {n:.0} requests in {duration_s} s, more than the {MAX_REQUESTS} a run may hold"
            ));
        }
        Ok(())
    }

    /// Replaces the arrival window by `duration_s` under the file's own
    /// checks (positive, at most [`MAX_REQUESTS`] requests at the apps'
    /// rates); an error names `key` (the option that gave it) and the value.
    pub fn set_duration_s(&mut self, duration_s: f64, key: &str) -> Result<(), WorkloadError> {
        let fail = |reason: String| WorkloadError {
            file: self.file.clone(),
            key: format!("{key} {duration_s}"),
            reason,
        };
        if !(duration_s.is_finite() && duration_s > 0.0) {
            return Err(fail("must be a positive number".into()));
        }
        self.check_requests(duration_s).map_err(fail)?;
        self.duration_s = Some(duration_s);
        Ok(())
    }

    /// Sets the camera's rate to `fps` under the file's checks (frames and
    /// requests per second at most [`MAX_RATE_HZ`], at most [`MAX_REQUESTS`]
    /// requests over the duration), its SLO scaled with the period; an
    /// error names `key` and the value. Nothing changes without a camera.
    pub fn set_camera_fps(&mut self, fps: f64, key: &str) -> Result<(), WorkloadError> {
        let fail = |reason: String| WorkloadError {
            file: self.file.clone(),
            key: format!("{key} {fps}"),
            reason,
        };
        let Some(cam) = self.camera else { return Ok(()) };
        if !(fps.is_finite() && fps > 0.0) {
            return Err(fail("must be a positive number".into()));
        }
        camera_rate(&self.apps, fps).map_err(fail)?;
        let mut w = self.clone();
        w.camera = Some(Camera {
            fps,
            slo_ms: cam.slo_ms * cam.fps / fps,
        });
        if let Some(d) = w.duration_s {
            w.check_requests(d).map_err(fail)?;
        }
        *self = w;
        Ok(())
    }
}

/// The checks of one workload file; `err` makes the error at a key.
struct Check<'a> {
    err: &'a dyn Fn(&str, String) -> WorkloadError,
}

impl Check<'_> {
    fn positive(&self, key: &str, v: f64) -> Result<f64, WorkloadError> {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err((self.err)(key, format!("must be a positive number, got {v}")))
        }
    }

    /// A positive request rate at most [`MAX_RATE_HZ`].
    fn rate(&self, key: &str, v: f64) -> Result<f64, WorkloadError> {
        let v = self.positive(key, v)?;
        if v > MAX_RATE_HZ {
            return Err((self.err)(
                key,
                format!("{v} requests/s is above the {MAX_RATE_HZ} a workload may ask (one per 0.1 ms)"),
            ));
        }
        Ok(v)
    }

    /// App `i` of the file, after `apps`; `camera`: the file has a
    /// `[camera]`; `slo_multiplier`: the file's.
    #[allow(clippy::too_many_arguments)]
    fn app(
        &self,
        i: usize,
        a: AppFile,
        apps: &[App],
        groups: &[crate::core::groups::Group],
        camera: bool,
        slo_multiplier: Option<f64>,
        dir: &Path,
    ) -> Result<App, WorkloadError> {
        let key = |k: &str| format!("app[{i}].{k}");
        let name = a.name.clone().unwrap_or_else(|| format!("app{i}"));
        if apps.iter().any(|x: &App| x.name == name) {
            return Err((self.err)(&key("name"), format!("'{name}' is used twice")));
        }
        let model = dir.join(&a.model);
        graph_ir::plain_file::check_plain(&model).map_err(|e| (self.err)(&key("model"), e.to_string()))?;
        let arrival = self.arrival(i, &a, apps, groups)?;
        if a.after.is_some() && !matches!(arrival, Arrival::Frame { .. }) {
            return Err((self.err)(
                &key("after"),
                "only apps with arrival = \"frame\" follow another".into(),
            ));
        }
        if camera && matches!(arrival, Arrival::Frame { .. }) && (a.slo_ms.is_some() || a.slo_multiplier.is_some()) {
            return Err((self.err)(
                &key("slo_ms"),
                "with [camera] the frame apps' SLO is camera.slo_ms".into(),
            ));
        }
        if a.group.is_some() && !matches!(arrival, Arrival::Group { .. }) {
            return Err((self.err)(
                &key("group"),
                "only apps with arrival = \"group\" belong to a group".into(),
            ));
        }
        let slo = match (a.slo_ms, a.slo_multiplier.or(slo_multiplier)) {
            (Some(ms), _) => Slo::Ms(self.positive(&key("slo_ms"), ms)?),
            (None, Some(m)) => Slo::Multiplier(self.positive(&key("slo_multiplier"), m)?),
            (None, None) => Slo::None,
        };
        let utility = self.utility(i, a.utility.as_ref())?;
        let frames = self.frames(i, &a, dir)?;
        let input_shape = match &a.input_shape {
            None => None,
            Some(text) => Some(
                text.parse::<graph_ir::onnx::InputShape>()
                    .map_err(|reason| (self.err)(&key("input_shape"), reason))?,
            ),
        };
        let scale_like = match &a.scale_like {
            None => None,
            Some(n) => Some(apps.iter().position(|x: &App| x.name == *n).ok_or_else(|| {
                (self.err)(
                    &key("scale_like"),
                    format!("'{n}' is not an app defined before this one"),
                )
            })?),
        };
        Ok(App {
            scale_like,
            input_shape,
            name,
            model,
            random_weights: a.random_weights,
            arrival,
            slo,
            processor: a.processor,
            utility,
            frames,
        })
    }

    /// App `i`'s arrival pattern; `after` and `group` name earlier apps and
    /// the file's groups.
    fn arrival(
        &self,
        i: usize,
        a: &AppFile,
        apps: &[App],
        groups: &[crate::core::groups::Group],
    ) -> Result<Arrival, WorkloadError> {
        let key = |k: &str| format!("app[{i}].{k}");
        let need = |k: &str, v: Option<f64>| match v {
            Some(v) => self.rate(&key(k), v),
            None => Err((self.err)(&key(k), format!("arrival '{}' needs {k}", a.arrival))),
        };
        Ok(match a.arrival.as_str() {
            "periodic" => Arrival::Periodic {
                fps: need("fps", a.fps)?,
            },
            "poisson" => Arrival::Poisson {
                rate: need("rate", a.rate)?,
            },
            "closed" => match a.fps {
                Some(fps) => Arrival::Paced {
                    fps: self.rate(&key("fps"), fps)?,
                },
                None => Arrival::Closed,
            },
            "group" => {
                let name = a
                    .group
                    .as_deref()
                    .ok_or_else(|| (self.err)(&key("group"), "arrival 'group' needs group = \"NAME\"".into()))?;
                Arrival::Group {
                    group: crate::core::groups::index_of(groups, name)
                        .map_err(|reason| (self.err)(&key("group"), reason))?,
                }
            }
            "frame" => Arrival::Frame {
                per_frame: a
                    .per_frame
                    .filter(|n| *n > 0)
                    .ok_or_else(|| (self.err)(&key("per_frame"), "arrival 'frame' needs per_frame >= 1".into()))?,
                after: match &a.after {
                    None => None,
                    Some(n) => Some(
                        apps.iter()
                            .position(|x: &App| x.name == *n && matches!(x.arrival, Arrival::Frame { .. }))
                            .ok_or_else(|| {
                                (self.err)(
                                    &key("after"),
                                    format!("'{n}' is not a frame app defined before this one"),
                                )
                            })?,
                    ),
                },
            },
            other => {
                return Err((self.err)(
                    &key("arrival"),
                    format!("unknown arrival '{other}' (periodic, poisson, closed, frame, group)"),
                ));
            }
        })
    }

    /// App `i`'s latency utility (Heimdall Eq. 3), the defaults where unset.
    fn utility(&self, i: usize, u: Option<&UtilityFile>) -> Result<Utility, WorkloadError> {
        let key = |k: &str| format!("app[{i}].{k}");
        let mut utility = Utility::default();
        if let Some(u) = u {
            utility.l0 = u.l0.unwrap_or(utility.l0);
            if !utility.l0.is_finite() {
                return Err((self.err)(
                    &key("utility.l0"),
                    format!("must be finite, got {}", utility.l0),
                ));
            }
            utility.beta = self.positive(&key("utility.beta"), u.beta.unwrap_or(utility.beta))?;
            utility.gamma = u.gamma.unwrap_or(utility.gamma);
            if !(utility.gamma.is_finite() && utility.gamma > 1.0) {
                return Err((self.err)(
                    &key("utility.gamma"),
                    format!(
                        "must be > 1 so that the latency utility falls ever faster (Heimdall Eq. 3), got {}",
                        utility.gamma
                    ),
                ));
            }
        }
        Ok(utility)
    }

    /// App `i`'s input frames: synthetic, a folder of frames, or none.
    fn frames(&self, i: usize, a: &AppFile, dir: &Path) -> Result<Frames, WorkloadError> {
        let key = |k: &str| format!("app[{i}].{k}");
        Ok(match (&a.frames, &a.frames_dir) {
            (Some(_), Some(_)) => return Err((self.err)(&key("frames"), "give frames or frames_dir, not both".into())),
            (Some(f), None) => {
                if !(f.variation.is_finite() && (0.0..=1.0).contains(&f.variation)) {
                    return Err((self.err)(
                        &key("frames.variation"),
                        format!("must be a share in [0, 1], got {}", f.variation),
                    ));
                }
                Frames::Synthetic { variation: f.variation }
            }
            (None, Some(d)) => {
                let d = dir.join(d);
                if !d.is_dir() {
                    return Err((self.err)(
                        &key("frames_dir"),
                        format!("no such folder: {}", d.display()),
                    ));
                }
                let frames = Frames::Dir(d);
                crate::core::content::FrameSource::open(&frames, 0)
                    .map_err(|e| (self.err)(&key("frames_dir"), e.to_string()))?;
                frames
            }
            (None, None) => Frames::None,
        })
    }

    fn outages(&self, file: Vec<OutageFile>) -> Result<Vec<Outage>, WorkloadError> {
        let mut outages = Vec::new();
        for (i, o) in file.into_iter().enumerate() {
            if !(o.at_s.is_finite() && o.at_s >= 0.0) {
                return Err((self.err)(
                    &format!("outage[{i}].at_s"),
                    format!("must be >= 0, got {}", o.at_s),
                ));
            }
            self.positive(&format!("outage[{i}].for_s"), o.for_s)?;
            outages.push(Outage {
                processor: o.processor,
                at_s: o.at_s,
                for_s: o.for_s,
            });
        }
        Ok(outages)
    }

    fn render(&self, r: RenderFile) -> Result<Render, WorkloadError> {
        let fps = self.positive("render.fps", r.fps)?;
        if fps > MAX_RATE_HZ {
            return Err((self.err)(
                "render.fps",
                format!("{fps} frames/s is above the {MAX_RATE_HZ} a workload may ask (one per 0.1 ms)"),
            ));
        }
        let render_ms = self.positive("render.render_ms", r.render_ms)?;
        let margin_ms = r.margin_ms.unwrap_or(5.0);
        if !(margin_ms.is_finite() && margin_ms >= 0.0) {
            return Err((self.err)("render.margin_ms", format!("must be >= 0, got {margin_ms}")));
        }
        let offload_margin = r.offload_margin.unwrap_or(0.1);
        if !(offload_margin.is_finite() && offload_margin >= 0.0) {
            return Err((self.err)(
                "render.offload_margin",
                format!("must be >= 0, got {offload_margin}"),
            ));
        }
        let offload_cycle_s = self.positive("render.offload_cycle_s", r.offload_cycle_s.unwrap_or(1.0))?;
        crate::core::workload::render_budget_ms(fps, render_ms)
            .map_err(|e| (self.err)("render.render_ms", e.to_string()))?;
        Ok(Render {
            processor: r.processor,
            fps,
            render_ms,
            margin_ms,
            offload_to: r.offload_to,
            offload_margin,
            offload_cycle_s,
        })
    }

    fn camera(&self, c: CameraFile, apps: &[App]) -> Result<Camera, WorkloadError> {
        let fps = self.positive("camera.fps", c.fps)?;
        if !apps.iter().any(|a| matches!(a.arrival, Arrival::Frame { .. })) {
            return Err((self.err)(
                "camera",
                "a camera drives frame apps; the workload has none".into(),
            ));
        }
        camera_rate(apps, fps).map_err(|reason| (self.err)("camera.fps", reason))?;
        Ok(Camera {
            fps,
            slo_ms: self.positive("camera.slo_ms", c.slo_ms.unwrap_or(1e3 / fps))?,
        })
    }
}

/// Requests each camera frame sends: every frame app's `per_frame`.
fn per_frame(apps: &[App]) -> f64 {
    apps.iter()
        .map(|a| match a.arrival {
            Arrival::Frame { per_frame, .. } => per_frame as f64,
            _ => 0.0,
        })
        .sum()
}

/// Refuses a camera rate of more than [`MAX_RATE_HZ`] frames, or frame
/// requests, per second.
fn camera_rate(apps: &[App], fps: f64) -> Result<(), String> {
    let per_s = fps * per_frame(apps);
    if fps > MAX_RATE_HZ || per_s > MAX_RATE_HZ {
        return Err(format!(
            "{fps} frames/s of {} requests each ask {per_s} requests/s, above the {MAX_RATE_HZ} a workload may ask (one per 0.1 ms)",
            per_frame(apps)
        ));
    }
    Ok(())
}

/// Parses workload text as if read from `dir/name` (tests, embedded examples).
pub fn parse(text: &str, dir: &Path, name: &str) -> Result<Workload, WorkloadError> {
    let err = |key: &str, reason: String| WorkloadError {
        file: name.to_string(),
        key: key.to_string(),
        reason,
    };
    let parsed: File = toml::from_str(text).map_err(|e| err("", e.message().to_string()))?;
    let mut w = Workload::build(parsed, dir, &err)?;
    w.file = name.to_string();
    Ok(w)
}
