//! A real cloud worker: `stretch worker --listen` in another process,
//! `stretch serve` offloading to it over a shaped link, with outputs
//! checked against the reference; the worker killed mid-run (nothing
//! lost), an address that refuses connections, a server that answers
//! garbage.

mod common;

use common::{scratch, stretch, stretch_ok};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A worker process on a free port, and its address.
struct Worker {
    child: Child,
    addr: String,
}

impl Worker {
    fn start() -> Worker {
        Worker::start_on("127.0.0.1:0")
    }

    fn start_on(listen: &str) -> Worker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stretch"))
            .args(["worker", "--listen", listen, "--engine", "tract"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start stretch worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .expect("address line")
            .to_string();
        Worker { child, addr }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn setup(dir: &Path, seconds: f64) -> String {
    stretch_ok(&[
        "zoo",
        "mbnet-mini",
        "--input-size",
        "32",
        "--classes",
        "10",
        "-o",
        dir.join("mb.onnx").to_str().unwrap(),
    ]);
    let w = dir.join("w.toml");
    std::fs::write(
        &w,
        format!("seed = 1\nduration_s = {seconds}\n[[app]]\nname = \"mb\"\nmodel = \"mb.onnx\"\narrival = \"periodic\"\nfps = 40\nslo_ms = 2000\n"),
    )
    .unwrap();
    w.to_str().unwrap().to_string()
}

fn serve(w: &str, cloud: &str) -> std::process::Output {
    stretch(&[
        "serve",
        "--workload",
        w,
        "--processor",
        "cpu0=pool",
        "--processor",
        "cpu1=pool",
        "--processor",
        cloud,
        "--policy",
        "round-robin",
        "--isolated-runs",
        "2",
        "--json",
    ])
}

fn report(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0].clone()
}

fn utilisation(r: &serde_json::Value, name: &str) -> f64 {
    r["utilisation"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u[0] == name)
        .map_or(0.0, |u| u[1].as_f64().unwrap())
}

#[test]
fn serve_offloads_to_a_real_worker_and_survives_its_death() {
    let dir = scratch("cloud-serve");
    let w = setup(&dir, 2.0);
    let worker = Worker::start();
    let spec = format!("cloud=pool,remote={},mbps=249,rtt_ms=2", worker.addr);
    let r = report(&serve(&w, &spec));
    assert_eq!(r["completed"], r["requests"], "{r}");
    assert!(r["outputs_checked"].as_u64().unwrap() > 0);
    assert_eq!(r["mismatches"], 0, "the cloud's outputs match the reference");
    assert!(utilisation(&r, "cloud") > 0.0, "round-robin gives the cloud work: {r}");
    assert!(r["worker_failures"].as_array().unwrap().is_empty());
    let link = &r["cloud_links"][0];
    assert_eq!(link["processor"], "cloud", "{r}");
    assert!(
        link["fit"]["ms_per_mb_in"].as_f64().is_some() && link["errors"]["calls"].as_u64().unwrap() > 0,
        "the cloud's latency model learnt from its calls: {link}"
    );

    let w = setup(&dir, 8.0);
    let mut worker = worker;
    let addr = worker.addr.clone();
    let spec = format!("cloud=pool,remote={addr},mbps=249,rtt_ms=2");
    let pid = worker.child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(3500));
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        std::thread::sleep(Duration::from_millis(1000));
        Worker::start_on(&addr)
    });
    let out = serve(&w, &spec);
    let _restarted = killer.join().unwrap();
    let _ = worker.child.wait();
    let r = report(&out);
    assert_eq!(r["completed"], r["requests"], "nothing lost: {r}");
    assert_eq!(r["lost"], 0);
    assert_eq!(r["mismatches"], 0);
    let failures = r["worker_failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{r}");
    assert_eq!(failures[0][1], "cloud");
    let outage = r["outages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["processor"] == "cloud")
        .unwrap_or_else(|| panic!("the failure is an outage of the cloud: {r}"));
    assert!(
        outage["up_s"].as_f64().is_some() && outage["resumed_after_ms"].as_f64().is_some(),
        "the restarted worker is probed, brought back and given work again: {outage}"
    );
}

#[test]
fn a_refused_address_leaves_the_cloud_out_and_the_run_goes_on() {
    let dir = scratch("cloud-refused");
    let w = setup(&dir, 1.0);
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = serve(&w, &format!("cloud=pool,remote=127.0.0.1:{port},timeout_ms=500"));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("leaving out processor 'cloud'"), "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    let r = report(&out);
    assert_eq!(r["completed"], r["requests"]);

    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let out = serve(&w, &format!("cloud=pool,remote={addr},timeout_ms=300"));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("leaving out processor 'cloud'") && err.contains("no reply") && err.contains(&addr),
        "a server that accepts but never answers is left out at start-up: {err}"
    );
    let r = report(&out);
    assert_eq!(r["completed"], r["requests"]);
    drop(silent);
}

/// A server that compiles anything and answers every run with `body`.
fn fake_server(body: &'static [u8]) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 65536];
            let mut got = Vec::new();
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            while let Ok(n) = s.read(&mut buf) {
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got);
                if let Some(head) = text.find("\r\n\r\n") {
                    let len: usize = text[..head]
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if got.len() >= head + 4 + len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let compile = got.starts_with(b"POST /compile");
            let reply: &[u8] = if compile { b"00ff" } else { body };
            let _ = s.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", reply.len()).as_bytes());
            let _ = s.write_all(reply);
        }
    });
    addr
}

/// A reply that is not the protocol's fails the run at start-up, when the
/// runtime first times the cloud, naming the processor and what is wrong
/// (the same failure mid-run takes the cloud out like a dead worker).
#[test]
fn a_malformed_reply_is_a_clear_error() {
    let dir = scratch("cloud-garbage");
    let w = setup(&dir, 1.0);
    let addr = fake_server(b"\x01\x00\x00\x00\x07garbage");
    let out = serve(&w, &format!("cloud=pool,remote={addr}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("processor 'cloud'") && err.contains("malformed reply") && err.contains(&addr),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// A thermal node's keys: heat capacity `c` J/°C, 20 °C/W to ambient, no
/// idle power, `active_w` when busy, then `extra` lines.
fn node(c: f64, active_w: f64, extra: &str) -> String {
    format!("capacitance_j_per_c = {c:?}\nresistance_c_per_w = 20.0\nidle_w = 0.0\nactive_w = {active_w:?}\n{extra}")
}

/// A runtime configuration of two pools, cpu0 and cpu1, with a
/// `[thermal]` section (25 °C ambient): `head` after its first keys, then
/// each processor's node.
fn two_pools_heated(head: &str, cpu0: &str, cpu1: &str) -> String {
    format!(
        "[[processor]]\nname = \"cpu0\"\nkind = \"pool\"\n[[processor]]\nname = \"cpu1\"\nkind = \"pool\"\n\
         [thermal]\nambient_c = 25.0\nsource = \"test\"\n{head}\n\
         [thermal.processors.cpu0]\n{cpu0}\n[thermal.processors.cpu1]\n{cpu1}\n"
    )
}

/// `serve --thermal`: the emulator beside a real run, throttling a hot
/// processor within seconds (tiny heat capacities; both workers run hot,
/// since which of two equal pools HEFT prefers depends on timing), and the
/// thermal policies refused without it.
#[test]
fn serve_emulates_heat_and_throttles_for_real() {
    let dir = scratch("cloud-thermal");
    let w = setup(&dir, 3.0);
    let rc = dir.join("rt.toml");
    let hot = node(
        0.05,
        40.0,
        r#"throttle = { kind = "slow", above_c = 30.0, release_c = 29.0, frequency = 0.5 }"#,
    );
    std::fs::write(&rc, two_pools_heated("", &hot, &hot)).unwrap();
    let out = stretch(&[
        "serve",
        "--workload",
        &w,
        "--runtime-config",
        rc.to_str().unwrap(),
        "--thermal",
        "--compare",
        "heft,min-heat",
        "--isolated-runs",
        "2",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in reports.as_array().unwrap() {
        assert_eq!(r["completed"], r["requests"], "{r}");
        assert_eq!(r["mismatches"], 0);
    }
    let line = |p: &str| {
        err.lines()
            .find(|l| l.starts_with(&format!("thermal (emulated) [{p}]")))
            .unwrap_or_else(|| panic!("no thermal line for {p}: {err}"))
            .to_string()
    };
    assert!(line("heft").contains("first throttled at"), "{}", line("heft"));
    assert!(line("min-heat").contains("cpu0"), "{}", line("min-heat"));

    let out = stretch(&["serve", "--workload", &w, "--policy", "min-heat"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("give --thermal"), "{err}");
}

/// `serve --thermal` reading a real sensor for one processor: a fake
/// sysfs tree with cpu0's zone at 55 °C (above its 50 °C threshold);
/// cpu1 stays emulated. A zone type the tree lacks is named.
#[test]
fn serve_reads_a_real_sensor_where_one_is_configured() {
    let dir = scratch("cloud-sensor");
    let w = setup(&dir, 1.0);
    let root = dir.join("sys-thermal");
    for (i, (ty, milli)) in [("cpu-big", "55000"), ("battery", "31000")].iter().enumerate() {
        let z = root.join(format!("thermal_zone{i}"));
        std::fs::create_dir_all(&z).unwrap();
        std::fs::write(z.join("type"), format!("{ty}\n")).unwrap();
        std::fs::write(z.join("temp"), format!("{milli}\n")).unwrap();
    }
    let config = |zone: &str| {
        let sensor = format!("[thermal.sensor]\nkind = \"sysfs\"\nroot = \"{}\"", root.display());
        let sensed = node(
            5.0,
            1.0,
            &format!(
                "zone = \"{zone}\"\nthrottle = {{ kind = \"slow\", above_c = 50.0, release_c = 45.0, frequency = 0.5 }}"
            ),
        );
        two_pools_heated(&sensor, &sensed, &node(5.0, 1.0, ""))
    };
    let rc = dir.join("rt.toml");
    std::fs::write(&rc, config("cpu-big")).unwrap();
    let run = || {
        stretch(&[
            "serve",
            "--workload",
            &w,
            "--runtime-config",
            rc.to_str().unwrap(),
            "--thermal",
            "--policy",
            "heft",
            "--isolated-runs",
            "2",
            "--json",
        ])
    };
    let out = run();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("thermal (sensed: cpu0; others emulated) [heft]"))
        .unwrap_or_else(|| panic!("no sensed thermal line: {err}"));
    assert!(
        line.contains("first throttled at") && line.contains("cpu0") && line.contains("peak 55.0 °C"),
        "{line}"
    );
    std::fs::write(&rc, config("npu-thermal")).unwrap();
    let out = run();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("[thermal.sensor]")
            && err.contains("no thermal zone of type 'npu-thermal'")
            && err.contains("cpu-big"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// A server that stops answering mid-run (the worker process stopped with
/// SIGSTOP: the kernel still accepts connections, nothing replies): each
/// call times out, the cloud is taken out and its subgraph re-runs
/// locally; once the process continues, the cloud serves again. Nothing
/// is lost.
#[test]
fn a_server_that_stops_answering_times_out_and_nothing_is_lost() {
    let dir = scratch("cloud-silent");
    let w = setup(&dir, 10.0);
    let worker = Worker::start();
    let spec = format!("cloud=pool,remote={},mbps=249,rtt_ms=2,timeout_ms=1000", worker.addr);
    let pid = worker.child.id().to_string();
    let signals = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(4000));
        let _ = Command::new("kill").args(["-STOP", &pid]).status();
        std::thread::sleep(Duration::from_millis(3000));
        let _ = Command::new("kill").args(["-CONT", &pid]).status();
    });
    let out = serve(&w, &spec);
    signals.join().unwrap();
    let r = report(&out);
    assert_eq!(r["completed"], r["requests"], "nothing lost: {r}");
    assert_eq!(r["mismatches"], 0);
    let failures = r["worker_failures"].as_array().unwrap();
    assert!(!failures.is_empty(), "the silent server timed out: {r}");
    assert!(
        failures.iter().all(|f| f[1] == "cloud"
            && f[2]
                .as_str()
                .unwrap()
                .contains("no valid reply (timed out: nothing came back within")),
        "{failures:?}"
    );
    assert_eq!(
        failures.len(),
        1,
        "the probe asks for an answer, so the stopped server is not brought back until it continues: {failures:?}"
    );
    let last = r["outages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|o| o["processor"] == "cloud")
        .unwrap()
        .clone();
    assert!(
        last["up_s"].as_f64().is_some(),
        "the cloud is back once the server answers again: {last}"
    );
}
