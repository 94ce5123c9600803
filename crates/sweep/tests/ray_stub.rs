//! The Ray client against a stub of the Job Submission API written from
//! its documented requests and answers (`GET /api/version`, `POST
//! /api/jobs/`, `GET /api/jobs/{id}`, `GET /api/jobs/{id}/logs`, `POST
//! /api/jobs/{id}/stop`, and the state API's `GET /api/v0/nodes`): what the
//! client sends, how the driver handles each job state, retries, stops and
//! follows jobs of an earlier run.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sweep::{Counts, Executor, Job, Observer, Phase, RayCluster, RayConfig, State, SweepError};

/// A submitted job in the stub: the statuses its polls answer, in order
/// (the last repeats), and the files it writes on success.
struct StubJob {
    statuses: Vec<&'static str>,
    polls: usize,
    outputs: Vec<PathBuf>,
    stopped: bool,
}

#[derive(Default)]
struct Stub {
    /// (method, path, body) of every request, in order.
    requests: Vec<(String, String, Option<Value>)>,
    jobs: BTreeMap<String, StubJob>,
    /// The statuses a job's attempt will go through, by (job, attempt).
    script: BTreeMap<(String, u32), Vec<&'static str>>,
    /// Outputs by job id, written when it succeeds.
    outputs: BTreeMap<String, Vec<PathBuf>>,
    gpus: f64,
    /// GPUs of the second alive node.
    gpus_b: f64,
    /// Jobs (by `stretch_job` and attempt) whose logs the cluster cannot
    /// give (their node is gone).
    no_logs: Vec<(String, u32)>,
    /// Submission id → (job, attempt).
    submitted: BTreeMap<String, (String, u32)>,
}

impl Stub {
    fn answer(&mut self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.requests.push((method.into(), path.into(), body.clone()));
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        match (method, parts.as_slice()) {
            ("GET", ["api", "version"]) => (200, json!({"version": "3", "ray_version": "2.40.0", "ray_commit": "x"})),
            ("GET", ["api", "v0", nodes]) if nodes.starts_with("nodes") => (
                200,
                json!({"result": true, "msg": "", "data": {"result": {"total": 2, "result": [
                    {"node_id": "a", "state": "ALIVE", "resources_total": {"CPU": 2.0, "GPU": self.gpus}},
                    {"node_id": "b", "state": "ALIVE", "resources_total": {"CPU": 2.0, "GPU": self.gpus_b}},
                    {"node_id": "c", "state": "DEAD", "resources_total": {"CPU": 64.0, "GPU": 8.0}}
                ]}}}),
            ),
            ("POST", ["api", "jobs"]) => {
                let body = body.unwrap_or_default();
                let Some(entrypoint) = body["entrypoint"].as_str() else {
                    return (400, json!("entrypoint is required"));
                };
                assert!(!entrypoint.is_empty());
                let id = body["submission_id"]
                    .as_str()
                    .expect("the client names its submissions")
                    .to_string();
                if self.jobs.contains_key(&id) {
                    return (400, json!(format!("Job with submission_id {id} already exists")));
                }
                let job = body["metadata"]["stretch_job"].as_str().unwrap_or("").to_string();
                let attempt: u32 = body["metadata"]["attempt"].as_str().unwrap_or("1").parse().unwrap_or(1);
                let statuses = self.script.get(&(job.clone(), attempt)).cloned().unwrap_or(vec![
                    "PENDING",
                    "RUNNING",
                    "SUCCEEDED",
                ]);
                let outputs = self.outputs.get(&job).cloned().unwrap_or_default();
                self.submitted.insert(id.clone(), (job.clone(), attempt));
                self.jobs.insert(
                    id.clone(),
                    StubJob {
                        statuses,
                        polls: 0,
                        outputs,
                        stopped: false,
                    },
                );
                (
                    200,
                    json!({"job_id": format!("raysubmit_{}", self.jobs.len()), "submission_id": id}),
                )
            }
            ("GET", ["api", "jobs", id]) => match self.jobs.get_mut(*id) {
                None => (404, json!(format!("Job {id} does not exist"))),
                Some(j) => {
                    let status = if j.stopped {
                        "STOPPED"
                    } else {
                        j.statuses[j.polls.min(j.statuses.len() - 1)]
                    };
                    j.polls += 1;
                    if status == "SUCCEEDED" {
                        for p in &j.outputs {
                            std::fs::write(p, b"written by a node").expect("output");
                        }
                    }
                    let message = if status == "FAILED" {
                        "Job entrypoint command failed with exit code 1"
                    } else {
                        ""
                    };
                    (200, json!({"status": status, "message": message, "submission_id": id}))
                }
            },
            ("GET", ["api", "jobs", id, "logs"]) => match self.submitted.get(*id) {
                Some(key) if self.no_logs.contains(key) => (500, json!("Failed to get the node of the job driver")),
                _ => (
                    200,
                    json!({"logs": format!("starting {id}\nerror: loss is NaN at epoch 1, batch 3\n")}),
                ),
            },
            ("POST", ["api", "jobs", id, "stop"]) => match self.jobs.get_mut(*id) {
                None => (404, json!(format!("Job {id} does not exist"))),
                Some(j) => {
                    let now = j.statuses[j.polls.saturating_sub(1).min(j.statuses.len() - 1)];
                    if now == "PENDING" {
                        j.statuses = vec!["PENDING"];
                        j.polls = 0;
                    } else {
                        j.stopped = true;
                    }
                    (200, json!({"stopped": true}))
                }
            },
            _ => (404, json!("not found")),
        }
    }
}

/// Serves `stub` on a loopback port; returns its address.
fn serve(stub: Arc<Mutex<Stub>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let stub = stub.clone();
            std::thread::spawn(move || handle(stream, &stub));
        }
    });
    address
}

fn handle(stream: TcpStream, stub: &Mutex<Stub>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut length = 0;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h).expect("header");
            if h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().expect("length");
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).expect("body");
        let body = (length > 0).then(|| serde_json::from_slice(&body).expect("the client sends JSON"));
        let (status, answer) = stub.lock().expect("stub").answer(&method, &path, body);
        let text = answer.to_string();
        let mut out = &stream;
        write!(
            out,
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        )
        .expect("answer");
    }
}

fn config(address: &str) -> RayConfig {
    RayConfig {
        address: address.to_string(),
        program: "/opt/stretch/bin/stretch".into(),
        cpus_per_job: 2.0,
        gpus_per_job: 0.0,
        max_in_flight: 8,
        env: BTreeMap::from([("RUST_BACKTRACE".to_string(), "1".to_string())]),
        tag: "t".into(),
        poll: Duration::from_millis(5),
    }
}

fn job(dir: &Path, id: &str, after: &[&str]) -> Job {
    Job {
        id: id.into(),
        label: id.into(),
        seed: 0,
        source: "m.onnx".into(),
        distilled: false,
        steps: vec![
            vec!["branch".into(), "m.onnx".into(), "--plan".into(), "p q.json".into()],
            vec!["train".into(), "m.onnx".into(), "--json".into(), "r.json".into()],
        ],
        after: after.iter().map(|s| s.to_string()).collect(),
        model: dir.join(format!("{id}.onnx")),
        result: dir.join(format!("{id}.json")),
        quantized: None,
        dirs: vec![dir.to_path_buf()],
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sweep-ray-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

#[derive(Default)]
struct Said {
    lines: Vec<String>,
    counts: Vec<Counts>,
    stop_when_running: Option<&'static AtomicBool>,
}

impl Observer for Said {
    fn counts(&mut self, c: Counts) {
        self.counts.push(c);
        if let Some(stop) = self.stop_when_running
            && c.running > 0
        {
            stop.store(true, Ordering::SeqCst);
        }
    }
    fn say(&mut self, line: String) {
        self.lines.push(line);
    }
}

fn stub_for(jobs: &[Job]) -> Arc<Mutex<Stub>> {
    let mut stub = Stub::default();
    for j in jobs {
        stub.outputs
            .insert(j.id.clone(), j.outputs().iter().map(|p| p.to_path_buf()).collect());
    }
    Arc::new(Mutex::new(stub))
}

#[test]
fn jobs_are_submitted_polled_retried_and_reported() {
    let dir = scratch("run");
    let jobs = vec![
        job(&dir, "a", &[]),
        job(&dir, "b", &[]),
        job(&dir, "c", &[]),
        job(&dir, "d", &["c"]),
    ];
    let stub = stub_for(&jobs);
    {
        let mut s = stub.lock().unwrap();
        s.script.insert(("b".into(), 1), vec!["RUNNING", "FAILED"]);
        for attempt in 1..=3 {
            s.script.insert(("c".into(), attempt), vec!["PENDING", "FAILED"]);
        }
    }
    let address = serve(stub.clone());
    let (mut cluster, info) = RayCluster::connect(config(&address)).expect("connect");
    assert_eq!(info.ray_version, "2.40.0");
    assert_eq!(info.total("CPU"), Some(4.0), "dead nodes count");
    let mut state = State::open(&dir).expect("state");
    let mut said = Said::default();
    let stop = AtomicBool::new(false);
    let outcome = sweep::run(&jobs, &mut state, &mut cluster, 2, &mut said, &stop).expect("run");
    assert_eq!(outcome.ran, 2, "a, and b on its second attempt: {:?}", said.lines);
    let failed: Vec<&str> = outcome.failed.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(failed, ["c", "d"]);
    let c_error = &outcome.failed[0].1;
    assert!(
        c_error.contains("exit code 1") && c_error.contains("loss is NaN at epoch 1"),
        "the cluster's message and the log's tail: {c_error}"
    );
    assert!(outcome.failed[1].1.contains("needs c"), "{:?}", outcome.failed);
    assert_eq!(state.jobs["a"].phase, Phase::Succeeded);
    assert_eq!((state.jobs["b"].phase, state.jobs["b"].attempts), (Phase::Succeeded, 2));
    assert_eq!((state.jobs["c"].phase, state.jobs["c"].attempts), (Phase::Failed, 3));
    assert_eq!(state.jobs["d"].attempts, 0, "d was submitted although c failed");
    assert!(
        said.lines.iter().any(|l| l.contains("b: attempt 1 of 3 failed")),
        "{:?}",
        said.lines
    );

    let s = stub.lock().unwrap();
    let submits: Vec<&Value> = s
        .requests
        .iter()
        .filter(|(m, p, _)| m == "POST" && p == "/api/jobs/")
        .map(|(_, _, b)| b.as_ref().expect("body"))
        .collect();
    assert_eq!(submits.len(), 1 + 2 + 3, "a once, b twice, c three times");
    let first = submits[0];
    assert_eq!(
        first["entrypoint"],
        "/opt/stretch/bin/stretch branch m.onnx --plan 'p q.json' && /opt/stretch/bin/stretch train m.onnx --json r.json"
    );
    assert_eq!(first["entrypoint_num_cpus"], 2.0);
    assert!(first.get("entrypoint_num_gpus").is_none(), "{first}");
    assert_eq!(first["runtime_env"]["env_vars"]["RUST_BACKTRACE"], "1");
    assert_eq!(first["metadata"]["stretch_job"], "a");
    let mut ids: Vec<&str> = submits
        .iter()
        .map(|b| b["submission_id"].as_str().expect("id"))
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), submits.len(), "a retry reused a submission id");
    assert!(s.requests.iter().any(|(m, p, _)| m == "GET" && p.ends_with("/logs")));
    let saved = std::fs::read_to_string(dir.join("state.json")).expect("state saved");
    assert!(saved.contains("\"phase\": \"failed\""), "{saved}");
}

#[test]
fn an_interrupted_sweep_stops_its_jobs_on_the_cluster() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let dir = scratch("stop");
    let jobs = vec![job(&dir, "a", &[]), job(&dir, "b", &[])];
    let stub = stub_for(&jobs);
    for j in ["a", "b"] {
        stub.lock().unwrap().script.insert((j.into(), 1), vec!["RUNNING"]);
    }
    let (mut cluster, _) = RayCluster::connect(config(&serve(stub.clone()))).expect("connect");
    let mut state = State::open(&dir).expect("state");
    let mut said = Said {
        stop_when_running: Some(&STOP),
        ..Said::default()
    };
    let err = sweep::run(&jobs, &mut state, &mut cluster, 0, &mut said, &STOP).expect_err("interrupted");
    assert!(matches!(err, SweepError::Interrupted { stopped: 2 }), "{err}");
    let s = stub.lock().unwrap();
    let stops = s
        .requests
        .iter()
        .filter(|(m, p, _)| m == "POST" && p.ends_with("/stop"))
        .count();
    assert_eq!(stops, 2);
    assert!(s.jobs.values().all(|j| j.stopped));
    let state = State::open(&dir).expect("reopen");
    assert!(
        state.jobs.values().all(|j| j.phase == Phase::Stopped),
        "{:?}",
        state.jobs
    );
}

#[test]
fn a_rerun_follows_a_job_still_running_on_the_cluster() {
    let dir = scratch("follow");
    let jobs = vec![job(&dir, "a", &[])];
    let stub = stub_for(&jobs);
    let address = serve(stub.clone());
    let (mut cluster, _) = RayCluster::connect(config(&address)).expect("connect");
    let handle = cluster.submit(&jobs[0], 1, &dir.join("logs/a.log")).expect("submit");
    let mut state = State::open(&dir).expect("state");
    state.reconcile(&jobs, true);
    let s = state.get_mut("a");
    s.phase = Phase::Running;
    s.handle = Some(handle.clone());
    s.attempts = 1;
    state.save().expect("save");
    let mut state = State::open(&dir).expect("reopen");
    let mut said = Said::default();
    let outcome = sweep::run(&jobs, &mut state, &mut cluster, 0, &mut said, &AtomicBool::new(false)).expect("run");
    assert_eq!(outcome.ran, 1);
    let submits = stub
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|(m, p, _)| m == "POST" && p == "/api/jobs/")
        .count();
    assert_eq!(submits, 1, "the running job was submitted again instead of followed");
    assert!(said.lines.iter().any(|l| l.contains("following a")), "{:?}", said.lines);
}

#[test]
fn requests_larger_than_the_largest_alive_node_are_refused_before_submitting() {
    let stub = Arc::new(Mutex::new(Stub::default()));
    let address = serve(stub.clone());
    let (_, info) = RayCluster::connect(config(&address)).expect("connect");
    assert_eq!(info.total("GPU"), Some(0.0));
    let e = info.check_request(&address, 1.0, 1.0).expect_err("no GPUs").to_string();
    assert!(e.contains(&address) && e.contains("has 2 CPU(s) and 0 GPU(s)"), "{e}");
    let e = info
        .check_request(&address, 4.0, 0.0)
        .expect_err("4 CPUs on 2-CPU nodes")
        .to_string();
    assert!(
        e.contains("asks for 4 CPU(s) and 0 GPU(s) on one node")
            && e.contains("largest of its 2 alive node(s) has 2 CPU(s)"),
        "{e}"
    );
    info.check_request(&address, 2.0, 0.0).expect("2 CPUs fit a node");
    {
        let mut s = stub.lock().unwrap();
        s.gpus = 1.0;
        s.gpus_b = 1.0;
    }
    let (_, info) = RayCluster::connect(config(&address)).expect("connect");
    assert_eq!(info.total("GPU"), Some(2.0));
    info.check_request(&address, 1.0, 1.0).expect("one GPU fits a node");
    let e = info
        .check_request(&address, 1.0, 2.0)
        .expect_err("two 1-GPU nodes")
        .to_string();
    assert!(e.contains("2 GPU(s)") && e.contains("has 2 CPU(s) and 1 GPU(s)"), "{e}");
}

#[test]
fn bad_addresses_are_refused_before_submitting() {
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let start = Instant::now();
    let unreachable = format!("http://127.0.0.1:{port}");
    let e = RayCluster::connect(config(&unreachable))
        .err()
        .expect("unreachable")
        .to_string();
    assert!(e.contains(&unreachable) && e.contains("/api/version"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    let e = RayCluster::connect(config("127.0.0.1:8265"))
        .err()
        .expect("no scheme")
        .to_string();
    assert!(e.contains("http://HOST:8265"), "{e}");
}

#[test]
fn a_stopped_job_that_ray_keeps_queued_is_reported() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let dir = scratch("stop-pending");
    let jobs = vec![job(&dir, "a", &[]), job(&dir, "b", &[])];
    let stub = stub_for(&jobs);
    stub.lock().unwrap().script.insert(("a".into(), 1), vec!["RUNNING"]);
    stub.lock().unwrap().script.insert(("b".into(), 1), vec!["PENDING"]);
    let (mut cluster, _) = RayCluster::connect(config(&serve(stub.clone()))).expect("connect");
    let mut state = State::open(&dir).expect("state");
    let mut said = Said {
        stop_when_running: Some(&STOP),
        ..Said::default()
    };
    let err = sweep::run(&jobs, &mut state, &mut cluster, 0, &mut said, &STOP).expect_err("interrupted");
    assert!(matches!(err, SweepError::Interrupted { stopped: 2 }), "{err}");
    let told: Vec<&String> = said.lines.iter().filter(|l| l.starts_with("b: ")).collect();
    assert!(
        told.len() == 1 && told[0].contains("queued (PENDING)") && told[0].contains("neither cancel nor delete"),
        "{:?}",
        said.lines
    );
    assert!(!said.lines.iter().any(|l| l.starts_with("a: ")), "{:?}", said.lines);
}

#[test]
fn jobs_the_cluster_has_queued_are_not_counted_as_running() {
    let dir = scratch("queued");
    let jobs = vec![job(&dir, "a", &[])];
    let stub = stub_for(&jobs);
    stub.lock()
        .unwrap()
        .script
        .insert(("a".into(), 1), vec!["PENDING", "PENDING", "RUNNING", "SUCCEEDED"]);
    let (mut cluster, _) = RayCluster::connect(config(&serve(stub))).expect("connect");
    let mut state = State::open(&dir).expect("state");
    let mut said = Said::default();
    sweep::run(&jobs, &mut state, &mut cluster, 0, &mut said, &AtomicBool::new(false)).expect("run");
    let seen: Vec<(usize, usize)> = said.counts.iter().map(|c| (c.running, c.queued)).collect();
    assert_eq!(seen[..3], [(0, 1), (0, 1), (1, 0)], "{:?}", said.counts);
}

#[test]
fn every_attempt_keeps_its_log_even_when_the_cluster_lost_it() {
    let dir = scratch("lost-log");
    let jobs = vec![job(&dir, "a", &[])];
    let stub = stub_for(&jobs);
    {
        let mut s = stub.lock().unwrap();
        s.script.insert(("a".into(), 1), vec!["RUNNING", "FAILED"]);
        s.no_logs.push(("a".into(), 1));
    }
    let (mut cluster, _) = RayCluster::connect(config(&serve(stub))).expect("connect");
    let mut state = State::open(&dir).expect("state");
    let outcome = sweep::run(
        &jobs,
        &mut state,
        &mut cluster,
        1,
        &mut Said::default(),
        &AtomicBool::new(false),
    )
    .expect("run");
    assert_eq!(outcome.ran, 1);
    let log = std::fs::read_to_string(state.log_path("a")).expect("log");
    let first = log
        .find("--- attempt 1 ---")
        .unwrap_or_else(|| panic!("no attempt 1: {log}"));
    let second = log
        .find("--- attempt 2 ---")
        .unwrap_or_else(|| panic!("no attempt 2: {log}"));
    assert!(first < second, "{log}");
    assert!(log[first..second].contains("could not be fetched"), "{log}");
    assert!(log[second..].contains("starting stretch-t-a-a2"), "{log}");
}

/// A web server that is not Ray: every request gets `status` and a long
/// HTML page.
fn not_ray(status: u16) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0; 4096];
            let _ = stream.read(&mut buf);
            let page = format!(
                "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body>{}</body></html>\n",
                "<p>filler text of a web page</p>\n".repeat(200)
            );
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    address
}

#[test]
fn a_server_that_is_not_ray_is_named_in_one_short_line() {
    for status in [404, 200] {
        let address = not_ray(status);
        let e = RayCluster::connect(config(&address))
            .err()
            .expect("not Ray")
            .to_string();
        assert!(e.contains(&address) && e.contains(&format!("HTTP {status}")), "{e}");
        assert!(
            e.contains("Welcome to nginx!") && !e.contains('<') && !e.contains('\n'),
            "{e}"
        );
        assert!(e.len() < 300, "{} characters: {e}", e.len());
    }
}
