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
use crate::executor::{Executor, Status, start_log};
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

/// The cluster as its version endpoint reports it.
#[derive(Debug, Clone)]
pub struct ClusterInfo {
    pub ray_version: String,
    /// Sum of the alive nodes' resources (`CPU`, `GPU`, ...), when the
    /// cluster's state API answers.
    pub resources: Option<BTreeMap<String, f64>>,
}

impl ClusterInfo {
    /// Fails when the cluster reported its resources and its alive nodes
    /// have fewer GPUs than one job asks for.
    pub fn check_gpus(&self, address: &str, per_job: f64) -> Result<(), SweepError> {
        let gpus = self.gpus();
        match gpus {
            Some(g) if per_job > g => Err(SweepError::Ray {
                address: address.to_string(),
                reason: format!(
                    "each job asks for {per_job} GPU(s) and the alive nodes have {g}; add GPU nodes or drop --gpus-per-job"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// GPUs on the alive nodes, when reported.
    pub fn gpus(&self) -> Option<f64> {
        self.resources.as_ref().map(|r| r.get("GPU").copied().unwrap_or(0.0))
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
            .ok_or_else(|| cluster.err(format!("/api/version answered without `ray_version`: {version}")))?
            .to_string();
        let resources = cluster
            .call("GET", "/api/v0/nodes?limit=10000", None)
            .ok()
            .and_then(|v| alive_resources(&v));
        Ok((cluster, ClusterInfo { ray_version, resources }))
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
            return Err(self.err(format!("{method} {path}: HTTP {status}: {}", text.trim())));
        }
        serde_json::from_str(&text).map_err(|e| self.err(format!("{method} {path}: not JSON ({e}): {}", text.trim())))
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

/// The summed resources of the alive nodes in an answer of the state
/// API's `/api/v0/nodes` (`data.result.result[*].resources_total`).
fn alive_resources(answer: &Value) -> Option<BTreeMap<String, f64>> {
    let nodes = answer.pointer("/data/result/result")?.as_array()?;
    let mut sum = BTreeMap::new();
    for node in nodes {
        if node.get("state").and_then(Value::as_str).is_some_and(|s| s != "ALIVE") {
            continue;
        }
        for (k, v) in node.get("resources_total")?.as_object()? {
            *sum.entry(k.clone()).or_insert(0.0) += v.as_f64().unwrap_or(0.0);
        }
    }
    Some(sum)
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
        if let Some(logs) = self
            .call("GET", &format!("/api/jobs/{handle}/logs"), None)
            .ok()
            .and_then(|v| v.get("logs").and_then(Value::as_str).map(str::to_string))
            && let Ok(mut f) = start_log(path, attempt)
        {
            let _ = write!(f, "# Ray submission {handle}\n{logs}");
        }
    }

    fn stop(&mut self, handle: &str) -> Result<(), SweepError> {
        self.call("POST", &format!("/api/jobs/{handle}/stop"), None).map(|_| ())
    }
}
