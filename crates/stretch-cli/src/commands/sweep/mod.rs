//! `stretch sweep`: trains every model × seed × precision of a sweep file,
//! on the local pool or on a Ray cluster, and prints `compare-accuracy`'s
//! table for each seed.

mod table;

pub(crate) use table::seed_rows;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use clap::Parser;
use sweep::{Counts, Executor, Job, LocalPool, Observer, RayCluster, RayConfig, State, SweepFile};

use table::report;

/// Train many variants of a model (models × seeds × precisions) as
/// independent jobs and compare them, as `compare-accuracy` does for one
/// seed.
///
/// SWEEP.toml names the original model (`original`: a file, or `zoo:NAME`
/// with `[zoo]` options for `stretch zoo`), the branched models (`models`:
/// files; `plans`: plans applied to the original with `stretch branch`;
/// `[[stretch]]` tables: `device`, `merges`, `options` and an optional
/// `name`, searched with `stretch stretch`), `seeds`, `precisions` (`fp32`, and `profile` with
/// `device`: each branched model also quantized before and after
/// quantization-aware fine-tuning, `[qat]` `epochs`, `lr`, `options`),
/// `distill`, `keep_weights`, the `dataset` and one `[recipe]` of `stretch
/// train` options (long names: `epochs = 10`, `batch_size = 64`). Relative
/// paths are taken from the sweep file's directory; configs/sweeps/ has
/// examples. Each job is one model at one seed: the `stretch` command lines
/// it runs (`--dry-run` prints them) are checked before anything starts.
///
/// The sweep directory (-o) keeps every job's state (`state.json`), log
/// (`logs/`), models and results (`seed{S}/`): a rerun of the same command
/// finishes only the jobs that have not (`--restart` runs everything
/// again), and a job whose command lines changed runs again. Without --ray
/// jobs run here, --jobs at a time; with `--ray http://HOST:8265` each job
/// is submitted to that Ray cluster (its Job Submission API) with
/// --cpus-per-job and --gpus-per-job, and nodes must see the sweep
/// directory, the model files and the dataset at the same paths (a shared
/// filesystem). A failed job is retried --retries times, then reported with
/// its log's tail while the others go on; Ctrl-C stops every running job.
/// With one CPU thread per job (the recipe's default), a job's result is
/// bit-identical wherever it ran.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The sweep file.
    #[arg(value_name = "SWEEP.toml")]
    pub sweep: PathBuf,

    /// The sweep directory [default: sweeps/NAME, NAME the sweep file's stem].
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Jobs run at the same time by the local pool (without --ray).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,

    /// Submit the jobs to the Ray cluster whose dashboard is at this address
    /// (what `ray job submit --address` takes).
    #[arg(long, value_name = "http://HOST:8265")]
    pub ray: Option<String>,

    /// With --ray: the command that runs stretch on a node [default: this
    /// binary's path, for nodes that share it].
    #[arg(long, value_name = "CMD", requires = "ray")]
    pub stretch_command: Option<String>,

    /// With --ray: CPUs reserved for each job.
    #[arg(long, default_value_t = 1.0, requires = "ray")]
    pub cpus_per_job: f64,

    /// With --ray: GPUs reserved for each job (give the recipe a GPU
    /// `backend` to use them).
    #[arg(long, default_value_t = 0.0, requires = "ray")]
    pub gpus_per_job: f64,

    /// With --ray: jobs submitted and not yet finished at most [default: all].
    #[arg(long, value_name = "N", requires = "ray")]
    pub max_in_flight: Option<usize>,

    /// With --ray: an environment variable for every job, as KEY=VALUE (repeat).
    #[arg(long = "env", value_name = "KEY=VALUE", requires = "ray")]
    pub env: Vec<String>,

    /// With --ray: seconds between status polls.
    #[arg(long, default_value_t = 2.0, requires = "ray")]
    pub poll: f64,

    /// Times a failed job is submitted again before it is reported.
    #[arg(long, default_value_t = 1)]
    pub retries: u32,

    /// Run every job again, finished or not.
    #[arg(long)]
    pub restart: bool,

    /// Print each job's command lines and stop.
    #[arg(long)]
    pub dry_run: bool,

    /// Also write the tables as JSON (schema "stretch.sweep/1": `seeds`,
    /// each with `seed` and `rows` as `compare-accuracy --json` writes
    /// them, and `failed` jobs with their errors).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// The progress bar and the driver's messages.
struct Display(indicatif::ProgressBar);

impl Observer for Display {
    fn counts(&mut self, c: Counts) {
        self.0.set_position((c.done + c.failed) as u64);
        self.0.set_message(format!(
            "done {} · running {} · queued {} · pending {} · failed {}",
            c.done, c.running, c.queued, c.pending, c.failed
        ));
    }
    fn say(&mut self, line: String) {
        if self.0.is_hidden() {
            eprintln!("{line}");
        } else {
            self.0.println(line);
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    let file = SweepFile::load(&args.sweep)?;
    let name = args
        .sweep
        .file_stem()
        .map_or_else(|| "sweep".to_string(), |s| s.to_string_lossy().into_owned());
    let dir = args.out.clone().unwrap_or_else(|| Path::new("sweeps").join(&name));
    let dir = std::path::absolute(&dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
    let layout = sweep::Layout {
        dir: &dir,
        default_lr: crate::recipe_args::DEFAULT_LR,
        flat: false,
    };
    let jobs = sweep::expand(&file, &layout);
    check_steps(&args.sweep, &jobs)?;
    if args.dry_run {
        for job in &jobs {
            println!("# {} ({})", job.id, job.source);
            for step in &job.steps {
                println!("stretch {}", sweep::local::shell_words(step));
            }
        }
        return Ok(());
    }
    let _lock = sweep::Lock::acquire(&dir)?;
    let mut exec = executor(&args, &name)?;
    let mut state = State::open(&dir)?;
    if args.restart {
        state.jobs.clear();
    }
    println!(
        "sweep {}: {} jobs ({} models x {} seeds) on {}, in {}",
        args.sweep.display(),
        jobs.len(),
        jobs.len() / file.seeds.len(),
        file.seeds.len(),
        exec.describe(),
        dir.display()
    );
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let bar = crate::progress::bar(jobs.len() as u64, "{bar:30} {pos}/{len} jobs  {msg} [{elapsed}]");
    let mut display = Display(bar.clone());
    let outcome = sweep::run(&jobs, &mut state, exec.as_mut(), args.retries, &mut display, &STOP);
    bar.finish_and_clear();
    let outcome = outcome?;
    if outcome.skipped > 0 {
        println!(
            "{} of {} jobs had finished in an earlier run and were not run again",
            outcome.skipped,
            jobs.len()
        );
    }
    report(&file, &jobs, &outcome.failed, args.json.as_deref())?;
    if !outcome.failed.is_empty() {
        bail!(
            "{} of {} jobs failed (logs in {}); rerun the same command to retry them",
            outcome.failed.len(),
            jobs.len(),
            dir.join("logs").display()
        );
    }
    Ok(())
}

/// Every job's command lines parsed as `stretch` would parse them, so
/// that an option the recipe misspells is refused before anything runs.
fn check_steps(sweep: &Path, jobs: &[Job]) -> Result<()> {
    for job in jobs {
        for step in &job.steps {
            let argv = std::iter::once("stretch").chain(step.iter().map(String::as_str));
            if let Err(e) = crate::Cli::try_parse_from(argv) {
                let text = e.to_string();
                let first = text.lines().next().unwrap_or("").trim_start_matches("error: ");
                bail!(
                    "{}: job {}: `stretch {}` refuses what the sweep gives it: {first}",
                    sweep.display(),
                    job.id,
                    step.first().map_or("", String::as_str)
                );
            }
        }
    }
    Ok(())
}

fn executor(args: &Args, name: &str) -> Result<Box<dyn Executor>> {
    let program = std::env::current_exe().context("cannot find the stretch binary")?;
    let Some(address) = &args.ray else {
        return Ok(Box::new(LocalPool::new(&program, args.jobs as usize)));
    };
    let mut env = BTreeMap::new();
    for kv in &args.env {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--env {kv}: give KEY=VALUE"))?;
        env.insert(k.to_string(), v.to_string());
    }
    let config = RayConfig {
        address: address.clone(),
        program: args
            .stretch_command
            .clone()
            .unwrap_or_else(|| sweep::local::quote(&program.to_string_lossy())),
        cpus_per_job: args.cpus_per_job,
        gpus_per_job: args.gpus_per_job,
        max_in_flight: args.max_in_flight.unwrap_or(usize::MAX),
        env,
        tag: name.to_string(),
        poll: std::time::Duration::from_secs_f64(args.poll.max(0.05)),
    };
    let (cluster, info) = RayCluster::connect(config)?;
    match &info.nodes {
        Some(nodes) => println!(
            "Ray {} at {address}: {} alive node(s), {} CPUs, {} GPUs in all",
            info.ray_version,
            nodes.len(),
            info.total("CPU").unwrap_or(0.0),
            info.total("GPU").unwrap_or(0.0)
        ),
        None => println!(
            "Ray {} at {address} (its nodes were not reported: the CPU and GPU requests are not checked)",
            info.ray_version
        ),
    }
    info.check_request(address, args.cpus_per_job, args.gpus_per_job)?;
    Ok(Box::new(cluster))
}
