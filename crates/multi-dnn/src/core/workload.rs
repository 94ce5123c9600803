//! Workloads (TOML): apps with a model, an SLO and an arrival pattern, and
//! scheduled outages. Errors name the file and the key.
//!
//! ```toml
//! seed = 7                 # arrivals (Poisson gaps, periodic phases)
//! duration_s = 20          # arrivals stop after this; or `requests = N`
//! slo_multiplier = 2.0     # default SLO: multiplier x isolated p99 on the fastest processor
//!
//! [[app]]
//! name = "scene"
//! model = "../../fixtures/models/mobilenet_v2.onnx"   # relative to this file
//! random_weights = 1       # fill structure-only initializers from this seed
//! arrival = "periodic"     # periodic (fps) | poisson (rate, per s) | closed | frame (per_frame) | group (group)
//! fps = 10
//! slo_ms = 60              # or slo_multiplier = 3
//! processor = "cpu1"       # where `fixed` runs it; default: its fastest processor
//! input_shape = "1x3x160x160"  # run the model at another input size
//! scale_like = "detect"    # simulate: predictions scaled like that app's measured latencies
//!
//! [[outage]]
//! processor = "cpu1"
//! at_s = 10
//! for_s = 7
//!
//! [render]                 # Heimdall: a periodic rendering task, highest priority
//! processor = "cpu0"       # the processor it renders on (the "GPU")
//! fps = 30
//! render_ms = 2.7
//! margin_ms = 5            # a chunk may overrun the budget 1/fps - render_ms by this
//! offload_to = "cpu1"      # the CPU that `-offload` policies may move DNNs to
//! offload_margin = 0.1     # m of Eq. 7
//! offload_cycle_s = 1
//! ```
//!
//! With a render task, an app may also declare `utility = { l0 = 1, beta =
//! 1, gamma = 2 }` (Heimdall Eq. 3, t in seconds; gamma > 1) and a frame
//! source for its content variation: `frames = { variation = 0.1 }`
//! (synthetic frames, that share of pixels changing per request) or
//! `frames_dir = "clips/a"` (`.npy` frames in name order, cycled).
//! `arrival = "closed"` with `fps` admits the next request when the
//! previous one finished and no sooner than 1/fps after it arrived.
//!
//! `arrival = "group"` with `group = "NAME"` makes the app a member of a
//! `[[group]]` (Puzzle's model groups, [`crate::core::groups`]).
//!
//! Frame-driven apps (Band's EagleEye) form one group: each camera frame
//! sends `per_frame` requests of every such app, and the next frame starts
//! when all of them have finished. An app with `after = "NAME"` sends its
//! requests of a frame when all of NAME's requests of that frame have
//! finished (Splash's Person Finder: detections, then recognitions). A
//! `[camera]` (`fps`, `slo_ms`, default 1000 / fps) takes frames at a fixed
//! rate instead; every request of a frame app must finish `slo_ms` after it
//! arrives (Splash: the camera's frame rate is the SLO).

use std::path::PathBuf;
use thiserror::Error;

pub use crate::core::content::Frames;

/// `key` empty: the file as a whole (it cannot be read or parsed).
#[derive(Debug, Error)]
#[error("{file}: {}{reason}", scheduler_rt::error::key_prefix(.key))]
pub struct WorkloadError {
    pub file: String,
    pub key: String,
    pub reason: String,
}

/// How an app's requests arrive.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrival {
    Periodic {
        fps: f64,
    },
    Poisson {
        rate: f64,
    },
    /// The next request when the previous one finished.
    Closed,
    /// The next request when the previous one finished, and no sooner than
    /// `1/fps` after the previous one arrived.
    Paced {
        fps: f64,
    },
    /// `per_frame` requests per camera frame of the frame group; with
    /// `after` (an earlier frame app), sent when all of that app's requests
    /// of the same frame have finished.
    Frame {
        per_frame: usize,
        after: Option<usize>,
    },
    /// One request per period of the model group (index into
    /// [`Workload::groups`]), at the same instants as every other member.
    Group {
        group: usize,
    },
}

/// An app's SLO.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Slo {
    Ms(f64),
    /// Times the model's isolated p99 latency on its fastest processor.
    Multiplier(f64),
    None,
}

/// Heimdall's latency utility L = l0 − beta · (t − t_start)^gamma (t in s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Utility {
    pub l0: f64,
    pub beta: f64,
    pub gamma: f64,
}

impl Default for Utility {
    fn default() -> Self {
        Utility {
            l0: 1.0,
            beta: 1.0,
            gamma: 2.0,
        }
    }
}

impl Utility {
    /// The latency utility `waited_ms` after the request was enqueued.
    pub fn latency(&self, waited_ms: f64) -> f64 {
        self.l0 - self.beta * (waited_ms.max(0.0) / 1e3).powf(self.gamma)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct App {
    pub name: String,
    pub model: PathBuf,
    pub random_weights: Option<u64>,
    pub arrival: Arrival,
    pub slo: Slo,
    pub processor: Option<String>,
    pub utility: Utility,
    pub frames: Frames,
    /// The model's input shape when it differs from the file's
    /// (`input_shape = "1x3x160x160"`).
    pub input_shape: Option<graph_ir::onnx::InputShape>,
    /// An earlier app whose measured/predicted latency ratios this app's
    /// predictions take (`scale_like = "NAME"`, a stand-in of the same
    /// architecture as NAME's).
    pub scale_like: Option<usize>,
}

/// Heimdall's rendering task and coordinator settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Render {
    pub processor: String,
    pub fps: f64,
    pub render_ms: f64,
    pub margin_ms: f64,
    pub offload_to: Option<String>,
    pub offload_margin: f64,
    pub offload_cycle_s: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Outage {
    pub processor: String,
    pub at_s: f64,
    pub for_s: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub file: String,
    pub seed: u64,
    pub duration_s: Option<f64>,
    pub requests: Option<usize>,
    pub apps: Vec<App>,
    pub outages: Vec<Outage>,
    pub render: Option<Render>,
    /// Model groups (Puzzle §2.2): members share one periodic input.
    pub groups: Vec<crate::core::groups::Group>,
    /// Frames of the frame apps come from a camera at a fixed rate instead
    /// of one after another.
    pub camera: Option<Camera>,
    /// The scheduler drops a queued job the policy finds can no longer
    /// meet its SLO ([`crate::core::Policy::drops`]), as Band does; a
    /// dropped job counts as a violation. Off: every job runs to the end.
    pub drop_late: bool,
}

/// A camera driving the frame apps (Splash's workloads, whose SLO is the
/// camera's frame rate): a frame every `1 / fps`, and every request of a
/// frame app must finish `slo_ms` after it arrives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub fps: f64,
    pub slo_ms: f64,
}

impl Workload {
    /// Each app's SLO in ms, the one rule every run uses: a model group's
    /// member has its group's period; a camera-driven app (`arrival =
    /// "frame"` with a `[camera]`) the camera's SLO; otherwise the app's
    /// `slo_ms`, or its multiplier times `isolated_ms[app]` (its isolated
    /// latency on its fastest processor; no SLO when that is not given),
    /// or none.
    pub fn slos(&self, isolated_ms: &[f64]) -> Vec<Option<f64>> {
        self.apps
            .iter()
            .enumerate()
            .map(|(i, a)| match a.slo {
                _ if self.group_deadline_ms(i).is_some() => self.group_deadline_ms(i),
                _ if self.camera.is_some() && matches!(a.arrival, Arrival::Frame { .. }) => {
                    self.camera.map(|c| c.slo_ms)
                }
                Slo::Ms(ms) => Some(ms),
                Slo::Multiplier(m) => isolated_ms.get(i).map(|iso| m * iso),
                Slo::None => None,
            })
            .collect()
    }

    /// Checks that every processor the workload names is configured.
    pub fn check_processors(&self, names: &[String]) -> Result<(), WorkloadError> {
        let bad = |key: String, p: &str| WorkloadError {
            file: self.file.clone(),
            key,
            reason: format!("unknown processor '{p}' (configured: {})", names.join(", ")),
        };
        for (i, a) in self.apps.iter().enumerate() {
            if let Some(p) = &a.processor
                && !names.contains(p)
            {
                return Err(bad(format!("app[{i}].processor"), p));
            }
        }
        for (i, o) in self.outages.iter().enumerate() {
            if !names.contains(&o.processor) {
                return Err(bad(format!("outage[{i}].processor"), &o.processor));
            }
        }
        if let Some(r) = &self.render {
            if !names.contains(&r.processor) {
                return Err(bad("render.processor".into(), &r.processor));
            }
            if let Some(p) = &r.offload_to {
                if !names.contains(p) {
                    return Err(bad("render.offload_to".into(), p));
                }
                if *p == r.processor {
                    return Err(WorkloadError {
                        file: self.file.clone(),
                        key: "render.offload_to".into(),
                        reason: format!("'{p}' is the render processor; name another processor"),
                    });
                }
            }
        }
        Ok(())
    }

    /// The same workload with every multiplier SLO replaced by `m`, and
    /// every resolved model group's period set to `m` × its base period.
    pub fn with_multiplier(&self, m: f64) -> Workload {
        let mut w = self.clone();
        for a in &mut w.apps {
            if matches!(a.slo, Slo::Multiplier(_) | Slo::None) {
                a.slo = Slo::Multiplier(m);
            }
        }
        if self.groups.iter().any(|g| g.base_ms.is_some()) {
            w = w.with_period_multiplier(m);
        }
        w
    }
}

/// A render task's frame leaves no time for DNNs.
#[derive(Debug, Error, PartialEq)]
#[error(
    "render_ms {render_ms} ms leaves no time for DNNs at {fps} fps (a frame lasts {period_ms:.2} ms): lower render_ms or fps"
)]
pub struct NoBudget {
    pub fps: f64,
    pub render_ms: f64,
    pub period_ms: f64,
}

/// The time a DNN may hold the render processor between two renders (ms):
/// the frame period less the render's own time.
pub fn render_budget_ms(fps: f64, render_ms: f64) -> Result<f64, NoBudget> {
    let period_ms = 1e3 / fps;
    let budget = period_ms - render_ms;
    if budget.is_nan() || budget <= 0.0 {
        return Err(NoBudget {
            fps,
            render_ms,
            period_ms,
        });
    }
    Ok(budget)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::workload_file::parse;

    #[test]
    fn an_unreadable_file_is_named_without_a_key() {
        let e = Workload::load(std::path::Path::new("/nonexistent/w.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/w.toml: cannot read: "), "{e}");
    }

    #[test]
    fn an_unknown_key_names_its_own_line() {
        let dir = std::env::temp_dir().join(format!("stretch-workload-line-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.toml");
        let text =
            "seed = 1\nduration_s = 1\n[[app]]\nmodel = \"m.onnx\"\narrival = \"periodic\"\nfps = 10\nslo_msec = 5\n";
        std::fs::write(&path, text).unwrap();
        let e = Workload::load(&path).unwrap_err().to_string();
        assert!(e.contains("line 7") && e.contains("slo_msec"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn absurd_rates_and_request_counts_are_refused_before_anything_runs() {
        let dir = std::env::temp_dir().join(format!("stretch-workload-rate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("m.onnx"), b"").unwrap();
        let load = |duration: &str, arrival: &str| {
            let path = dir.join("w.toml");
            let text = format!("duration_s = {duration}\n[[app]]\nmodel = \"m.onnx\"\n{arrival}\n");
            std::fs::write(&path, text).unwrap();
            Workload::load(&path).map(|_| ()).unwrap_err().to_string()
        };
        let e = load("1", "arrival = \"periodic\"\nfps = 1e12");
        assert!(e.contains("app[0].fps") && e.contains("above the 10000"), "{e}");
        let e = load("1e6", "arrival = \"poisson\"\nrate = 100");
        assert!(e.contains("duration_s") && e.contains("100000000 requests"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn camera_and_render_rates_are_bounded_like_app_rates() {
        let frame = "[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"frame\"\nper_frame = 3\n";
        let err = |text: String| parse(&text, &dir(), "w.toml").map(|_| ()).unwrap_err().to_string();
        let e = err(format!("duration_s = 1\n[camera]\nfps = 1e12\n{frame}"));
        assert!(e.contains("camera.fps") && e.contains("above the 10000"), "{e}");
        let e = err(format!("duration_s = 1\n[camera]\nfps = 5000\n{frame}"));
        assert!(e.contains("camera.fps") && e.contains("15000 requests/s"), "{e}");
        let e = err(format!("duration_s = 1e4\n[camera]\nfps = 1000\n{frame}"));
        assert!(e.contains("duration_s") && e.contains("30000000 requests"), "{e}");
        let e = err(
            "duration_s = 1\n[render]\nprocessor = \"gpu\"\nfps = 1e12\nrender_ms = 1e-10\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"closed\"".into(),
        );
        assert!(e.contains("render.fps") && e.contains("above the 10000"), "{e}");
        let e = err("requests = 1000000000000\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"closed\"".into());
        assert!(e.contains("requests") && e.contains("5000000"), "{e}");
        let mut w = parse(
            &format!("duration_s = 1\n[camera]\nfps = 30\n{frame}"),
            &dir(),
            "w.toml",
        )
        .unwrap();
        let e = w.set_camera_fps(1e12, "--fps-sweep").unwrap_err().to_string();
        assert!(
            e.contains("--fps-sweep 1000000000000") && e.contains("above the 10000"),
            "{e}"
        );
        w.set_camera_fps(60.0, "--fps-sweep").unwrap();
        let e = w.set_duration_s(1e7, "--duration-s").unwrap_err().to_string();
        assert!(e.contains("--duration-s 10000000") && e.contains("5000000"), "{e}");
    }

    fn dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
    }

    #[test]
    fn parses_every_arrival_kind() {
        let w = parse(
            r#"
seed = 3
duration_s = 5
slo_multiplier = 2
[[app]]
model = "resnet18.onnx"
arrival = "periodic"
fps = 10
[[app]]
model = "resnet18.onnx"
arrival = "poisson"
rate = 4
slo_ms = 100
[[app]]
model = "resnet18.onnx"
arrival = "closed"
[[app]]
model = "resnet18.onnx"
arrival = "frame"
per_frame = 2
[[outage]]
processor = "cpu1"
at_s = 1
for_s = 2
"#,
            &dir(),
            "w.toml",
        )
        .unwrap();
        assert_eq!(w.apps.len(), 4);
        assert_eq!(w.apps[0].arrival, Arrival::Periodic { fps: 10.0 });
        assert_eq!(w.apps[0].slo, Slo::Multiplier(2.0));
        assert_eq!(w.apps[1].slo, Slo::Ms(100.0));
        assert_eq!(
            w.apps[3].arrival,
            Arrival::Frame {
                per_frame: 2,
                after: None
            }
        );
        assert_eq!(w.outages[0].for_s, 2.0);
        assert_eq!(w.render, None);
        assert!(
            w.check_processors(&["cpu0".into()])
                .unwrap_err()
                .to_string()
                .contains("outage[0].processor")
        );
    }

    #[test]
    fn a_render_task_is_read_and_its_processors_checked() {
        let text = |render: &str| {
            format!(
                "duration_s = 1\n[render]\n{render}\nfps = 30\nrender_ms = 2.7\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"closed\"\nfps = 2\nutility = {{ l0 = 2, beta = 3, gamma = 1.5 }}\nframes = {{ variation = 0.1 }}"
            )
        };
        let w = parse(&text("processor = \"gpu\"\noffload_to = \"cpu\""), &dir(), "w.toml").unwrap();
        let r = w.render.clone().unwrap();
        assert_eq!(
            (r.fps, r.render_ms, r.margin_ms, r.offload_margin),
            (30.0, 2.7, 5.0, 0.1)
        );
        assert_eq!(w.apps[0].arrival, Arrival::Paced { fps: 2.0 });
        assert_eq!(w.apps[0].utility.gamma, 1.5);
        assert_eq!(w.apps[0].frames, Frames::Synthetic { variation: 0.1 });
        w.check_processors(&["gpu".into(), "cpu".into()]).unwrap();
        let e = w
            .check_processors(&["cpu0".into(), "cpu".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("render.processor") && e.contains("'gpu'"), "{e}");
        let w = parse(&text("processor = \"gpu\"\noffload_to = \"gpu\""), &dir(), "w.toml").unwrap();
        let e = w.check_processors(&["gpu".into()]).unwrap_err().to_string();
        assert!(e.contains("render.offload_to"), "{e}");
    }

    #[test]
    fn errors_name_the_key() {
        for (text, key) in [
            (
                "duration_s = 1\n[[app]]\nmodel = \"nope.onnx\"\narrival = \"closed\"",
                "app[0].model",
            ),
            (
                "duration_s = 1\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"closed\"\nslo_ms = 0",
                "app[0].slo_ms",
            ),
            (
                "duration_s = 1\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"periodic\"",
                "app[0].fps",
            ),
            (
                "duration_s = 1\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"often\"",
                "app[0].arrival",
            ),
            ("[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"closed\"", "duration_s"),
            (
                "duration_s = 1\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"closed\"\nutility = { gamma = 1 }",
                "app[0].utility.gamma",
            ),
            (
                "duration_s = 1\n[render]\nprocessor = \"gpu\"\nfps = 30\nrender_ms = 40\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"closed\"",
                "render.render_ms",
            ),
            (
                "duration_s = 1\n[[app]]\nmodel = \"resnet18.onnx\"\narrival = \"closed\"\nframes_dir = \"nope\"",
                "app[0].frames_dir",
            ),
        ] {
            let e = parse(text, &dir(), "w.toml").unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }
}
