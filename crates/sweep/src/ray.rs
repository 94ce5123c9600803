//! A client of Ray's Job Submission REST API (the dashboard's `/api/jobs/`
//! endpoints that `ray job submit --address` uses): each sweep job becomes
//! one Ray job whose entrypoint runs the job's `stretch` command lines on a
//! node, with its CPU and GPU request; results are read back from the
//! sweep directory, which every node must share.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::SweepError;
use crate::executor::{Executor, Status, Stopped, start_log};
use crate::expand::Job;
use crate::local::shell_words;

/// How jobs are submitted to a cluster.
#[derive(Debug, Clone)]
pub struct RayConfig {
    /// The dashboard's address (`http://HOST:8265`), as `ray job submit
    /// --address` takes it.
    pub address: String,
    /// The command that starts `stretch` on a node (a path, or a command
    /// found on the nodes' PATH).
    pub program: String,
    pub cpus_per_job: f64,
    pub gpus_per_job: f64,
    /// Jobs submitted and not finished at most (the cluster queues the rest
    /// of what it cannot place).
    pub max_in_flight: usize,
    /// Environment variables every job gets.
    pub env: BTreeMap<String, String>,
    /// A tag in every submission id (the sweep's name).
    pub tag: String,
    pub poll: Duration,
}

/// The cluster as its version endpoint and its state API report it.
#[derive(Debug, Clone)]
pub struct ClusterInfo {
    pub ray_version: String,
    /// Each alive node's resources (`CPU`, `GPU`, ...), when the cluster's
    /// state API answers.
    pub nodes: Option<Vec<BTreeMap<String, f64>>>,
}

impl ClusterInfo {
    /// The alive nodes' `resource` summed, when reported.
    pub fn total(&self, resource: &str) -> Option<f64> {
        self.nodes
            .as_ref()
            .map(|nodes| nodes.iter().filter_map(|n| n.get(resource)).sum())
    }

    /// Fails when the cluster reported its nodes and no single alive node
    /// holds `cpus` CPUs and `gpus` GPUs: Ray places a job on one node, so
    /// such a job would wait forever.
    pub fn check_request(&self, address: &str, cpus: f64, gpus: f64) -> Result<(), SweepError> {
        let Some(nodes) = &self.nodes else {
            return Ok(());
        };
        let has = |n: &BTreeMap<String, f64>, k: &str| n.get(k).copied().unwrap_or(0.0);
        if nodes.iter().any(|n| has(n, "CPU") >= cpus && has(n, "GPU") >= gpus) {
            return Ok(());
        }
        let key = |n: &BTreeMap<String, f64>| {
            if gpus > 0.0 {
                (has(n, "GPU"), has(n, "CPU"))
            } else {
                (has(n, "CPU"), has(n, "GPU"))
            }
        };
        let largest = nodes.iter().map(key).fold((0.0, 0.0), |a, b| if b > a { b } else { a });
        let (node_cpus, node_gpus) = if gpus > 0.0 { (largest.1, largest.0) } else { largest };
        Err(SweepError::TooLarge {
            address: address.to_string(),
            cpus,
            gpus,
            node_cpus,
            node_gpus,
            nodes: nodes.len(),
        })
    }
}

/// The Ray executor.
pub struct RayCluster {
    config: RayConfig,
    agent: ureq::Agent,
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into()
}

impl RayCluster {
    /// Connects to `config.address` and reads the cluster's version and
    /// resources; an unreachable address fails here, naming it.
    pub fn connect(mut config: RayConfig) -> Result<(RayCluster, ClusterInfo), SweepError> {
        config.address = config.address.trim_end_matches('/').to_string();
        if !config.address.starts_with("http://") && !config.address.starts_with("https://") {
            return Err(SweepError::Ray {
                address: config.address,
                reason: "give the dashboard's URL, as `http://HOST:8265`".into(),
            });
        }
        let cluster = RayCluster {
            config,
            agent: agent(Duration::from_secs(30)),
        };
        let version = cluster.call("GET", "/api/version", None)?;
        let ray_version = version
            .get("ray_version")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                cluster.err(format!(
                    "/api/version answered without `ray_version` ({}): is this a Ray dashboard?",
                    brief(&version.to_string())
                ))
            })?
            .to_string();
        let nodes = cluster
            .call("GET", "/api/v0/nodes?limit=10000", None)
            .ok()
            .and_then(|v| alive_nodes(&v));
        Ok((cluster, ClusterInfo { ray_version, nodes }))
    }

    fn err(&self, reason: String) -> SweepError {
        SweepError::Ray {
            address: self.config.address.clone(),
            reason,
        }
    }

    /// One request; a JSON answer, or an error naming the endpoint and
    /// what the cluster said.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, SweepError> {
        let url = format!("{}{path}", self.config.address);
        let response = match (method, body) {
            ("POST", Some(b)) => self
                .agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(b.to_string()),
            ("POST", None) => self.agent.post(&url).send_empty(),
            _ => self.agent.get(&url).call(),
        };
        let mut response = response.map_err(|e| self.err(format!("{method} {path}: {e}")))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| self.err(format!("{method} {path}: cannot read the answer: {e}")))?;
        if !(200..300).contains(&status) {
            return Err(self.err(format!("{method} {path}: HTTP {status}: {}", brief(&text))));
        }
        serde_json::from_str(&text).map_err(|_| {
            self.err(format!(
                "{method} {path}: HTTP {status} with an answer that is not JSON ({}): is this a Ray dashboard?",
                brief(&text)
            ))
        })
    }

    /// The shell command a node runs for `job`.
    pub fn entrypoint(&self, job: &Job) -> String {
        job.steps
            .iter()
            .map(|s| format!("{} {}", self.config.program, shell_words(s)))
            .collect::<Vec<_>>()
            .join(" && ")
    }

    fn submission_id(&self, job: &Job, attempt: u32) -> String {
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
                .collect()
        };
        format!(
            "stretch-{}-{}-a{attempt}-{nonce}",
            clean(&self.config.tag),
            clean(&job.id)
        )
    }
}

/// Each alive node's resources in an answer of the state API's
/// `/api/v0/nodes` (`data.result.result[*].resources_total`).
fn alive_nodes(answer: &Value) -> Option<Vec<BTreeMap<String, f64>>> {
    let nodes = answer.pointer("/data/result/result")?.as_array()?;
    let mut alive = Vec::new();
    for node in nodes {
        if node.get("state").and_then(Value::as_str).is_some_and(|s| s != "ALIVE") {
            continue;
        }
        let resources = node.get("resources_total")?.as_object()?;
        alive.push(
            resources
                .iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0)))
                .collect(),
        );
    }
    Some(alive)
}

/// What a person needs of an answer that is not the API's: its first line,
/// shortened, or an HTML page's title.
fn brief(text: &str) -> String {
    const MAX: usize = 120;
    let text = text.trim();
    let lower = text.to_ascii_lowercase();
    if lower.starts_with("<!doctype html") || lower.starts_with("<html") || lower.contains("<body") {
        let title = lower
            .find("<title>")
            .map(|at| &text[at + "<title>".len()..])
            .and_then(|rest| rest.find('<').map(|end| rest[..end].trim()))
            .filter(|t| !t.is_empty());
        return match title {
            Some(t) => format!("an HTML page, \"{}\"", shorten(t, MAX)),
            None => "an HTML page".to_string(),
        };
    }
    shorten(text.lines().next().unwrap_or("").trim(), MAX)
}

/// `line` cut to `max` characters, marked when cut.
fn shorten(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line.to_string(),
    }
}

impl Executor for RayCluster {
    fn describe(&self) -> String {
        format!("the Ray cluster at {}", self.config.address)
    }

    fn slots(&self) -> usize {
        self.config.max_in_flight.max(1)
    }

    fn poll_interval(&self) -> Duration {
        self.config.poll
    }

    fn follows_handles(&self) -> bool {
        true
    }

    fn submit(&mut self, job: &Job, attempt: u32, _log: &Path) -> Result<String, SweepError> {
        let id = self.submission_id(job, attempt);
        let mut body = json!({
            "entrypoint": self.entrypoint(job),
            "submission_id": id,
            "metadata": {"stretch_sweep": self.config.tag, "stretch_job": job.id, "attempt": attempt.to_string()},
            "runtime_env": {"env_vars": self.config.env},
        });
        if self.config.cpus_per_job > 0.0 {
            body["entrypoint_num_cpus"] = json!(self.config.cpus_per_job);
        }
        if self.config.gpus_per_job > 0.0 {
            body["entrypoint_num_gpus"] = json!(self.config.gpus_per_job);
        }
        let answer = self.call("POST", "/api/jobs/", Some(body))?;
        Ok(answer
            .get("submission_id")
            .and_then(Value::as_str)
            .unwrap_or(&id)
            .to_string())
    }

    fn status(&mut self, handle: &str) -> Result<Status, SweepError> {
        let answer = self.call("GET", &format!("/api/jobs/{handle}"), None)?;
        let message = answer.get("message").and_then(Value::as_str).unwrap_or("").to_string();
        match answer.get("status").and_then(Value::as_str) {
            Some("PENDING") => Ok(Status::Pending),
            Some("RUNNING") => Ok(Status::Running),
            Some("SUCCEEDED") => Ok(Status::Succeeded),
            Some("STOPPED") => Ok(Status::Stopped),
            Some("FAILED") => Ok(Status::Failed(match message.lines().next() {
                Some(first) if !first.trim().is_empty() => first.trim_end_matches([',', ':']).to_string(),
                _ => "the job failed on the cluster".into(),
            })),
            other => Err(self.err(format!("job {handle}: unknown status {other:?}: {answer}"))),
        }
    }

    fn keep_log(&mut self, handle: &str, path: &Path, attempt: u32) {
        let logs = self
            .call("GET", &format!("/api/jobs/{handle}/logs"), None)
            .and_then(|v| {
                v.get("logs")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| self.err(format!("GET /api/jobs/{handle}/logs: no `logs` in the answer")))
            });
        if let Ok(mut f) = start_log(path, attempt) {
            let _ = match logs {
                Ok(logs) => write!(f, "# Ray submission {handle}\n{logs}"),
                Err(e) => writeln!(f, "# Ray submission {handle}: its log could not be fetched: {e}"),
            };
        }
    }

    /// Asks Ray to stop the job. Ray stops a job it has queued (PENDING)
    /// only once a node takes it, and refuses to delete a job before it
    /// ends, so such a job is reported as stopped later.
    fn stop(&mut self, handle: &str) -> Result<Stopped, SweepError> {
        self.call("POST", &format!("/api/jobs/{handle}/stop"), None)?;
        Ok(match self.status(handle) {
            Ok(Status::Pending) => Stopped::Later(format!(
                "Ray keeps its submission {handle} queued (PENDING) until a node can take it, then stops it before it runs; \
                 its job API can neither cancel nor delete a queued job (`ray job stop {handle}` has the same effect)"
            )),
            _ => Stopped::Now,
        })
    }
}
