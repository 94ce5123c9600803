//! `stretch`: makes CNNs run faster on devices with several processors by
//! branching their stages across processors (NN-Stretch).

mod chart;
mod chrome_trace;
mod commands;
mod curve;
mod format;
mod front_plot;
mod gantt;
mod model_args;
mod multi_common;
mod output;
mod panics;
mod plan_text;
mod progress;
mod puzzle_setup;
mod recipe_args;
mod render_run;
mod runtime_args;

use clap::{Parser, Subcommand};
use std::panic::AssertUnwindSafe;

/// Turn a sequential CNN (ONNX) into a multi-branch one that runs its stages
/// in parallel on a device's processors, retrain it, and run it.
///
/// Every command reads ONNX models as PyTorch/torchvision export them
/// (opset 11 to 18). Structure-only models (initializers with dims but no
/// data) are accepted; pass --random-weights SEED where values are needed.
#[derive(Parser)]
#[command(name = "stretch", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Inspect(commands::inspect::Args),
    Convert(commands::convert::Args),
    Predict(commands::predict::Args),
    Fit(commands::fit::Args),
    Plan(commands::plan::Args),
    Branch(commands::branch::Args),
    Stretch(commands::branch::StretchArgs),
    Quantize(commands::quantize::Args),
    Export(commands::export::Args),
    ImportWeights(commands::import_weights::Args),
    Gradients(commands::gradients::Args),
    Zoo(commands::zoo::Args),
    Profile(commands::profile::Args),
    Run(commands::run::Args),
    Bench(commands::bench::Args),
    Train(commands::train::Args),
    Evaluate(commands::evaluate::Args),
    CompareAccuracy(commands::compare::Args),
    Sweep(commands::sweep::Args),
    Serve(commands::serve::Args),
    Simulate(commands::simulate::Args),
    Analyze(commands::analyze::Args),
    Worker(commands::worker::Args),
}

fn main() {
    let cli = Cli::parse();
    panics::quiet_engine_panics();
    let forwarder = output::start();
    let finish = move || {
        if let Some(f) = forwarder {
            f.finish();
        }
    };
    let result = match std::panic::catch_unwind(AssertUnwindSafe(|| dispatch(cli.command))) {
        Ok(r) => r,
        Err(payload) if panics::stdout_closed(&panics::payload_text(payload.as_ref())) => return finish(),
        Err(payload) => match panics::escaped(payload.as_ref()) {
            Some(text) => Err(anyhow::anyhow!("the inference engine failed: {text}")),
            None => {
                finish();
                std::panic::resume_unwind(payload)
            }
        },
    };
    finish();
    if let Err(e) = result {
        if e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        }) {
            return;
        }
        eprintln!("error: {}", message(&e));
        std::process::exit(exit_code(&e));
    }
}

/// 130 (128 + SIGINT, as a shell reports it) for a command stopped by
/// Ctrl-C or SIGTERM, else 1.
fn exit_code(e: &anyhow::Error) -> i32 {
    let interrupted = e
        .chain()
        .any(|c| matches!(c.downcast_ref(), Some(sweep::SweepError::Interrupted { .. })));
    if interrupted { 130 } else { 1 }
}

fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Inspect(a) => commands::inspect::run(a),
        Command::Convert(a) => commands::convert::run(a),
        Command::Predict(a) => commands::predict::run(a),
        Command::Fit(a) => commands::fit::run(a),
        Command::Plan(a) => commands::plan::run(a),
        Command::Branch(a) => commands::branch::run(a),
        Command::Stretch(a) => commands::branch::run_stretch(a),
        Command::Quantize(a) => commands::quantize::run(a),
        Command::Export(a) => commands::export::run(a),
        Command::ImportWeights(a) => commands::import_weights::run(a),
        Command::Gradients(a) => commands::gradients::run(a),
        Command::Zoo(a) => commands::zoo::run(a),
        Command::Profile(a) => commands::profile::run(a),
        Command::Run(a) => commands::run::run(a),
        Command::Bench(a) => commands::bench::run(a),
        Command::Train(a) => commands::train::run(a),
        Command::Evaluate(a) => commands::evaluate::run(a),
        Command::CompareAccuracy(a) => commands::compare::run(a),
        Command::Sweep(a) => commands::sweep::run(a),
        Command::Serve(a) => commands::serve::run(a),
        Command::Simulate(a) => commands::simulate::run(a),
        Command::Worker(a) => commands::worker::run(a),
        Command::Analyze(a) => commands::analyze::run(a),
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose text an
/// earlier message already quotes (library errors often embed their source).
fn message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg
}

/// Prints a warning on stderr, once per process, when `profile` was
/// measured on another CPU than the one this process runs on.
fn warn_if_measured_elsewhere(profile: &predictor::DeviceProfile) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Some(w) = profile.measured_elsewhere(&predictor::profiler::host::this_cpu_model())
        && !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        eprintln!("warning: {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::message;

    #[test]
    fn a_cause_already_quoted_is_not_repeated() {
        let io = std::io::Error::other("no such file");
        let e = anyhow::Error::new(io)
            .context("a.toml: cannot read: no such file")
            .context("cannot predict m.onnx");
        assert_eq!(message(&e), "cannot predict m.onnx: a.toml: cannot read: no such file");
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(message(&plain), "outer: inner");
    }
}
