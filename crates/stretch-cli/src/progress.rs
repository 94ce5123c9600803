//! Progress bars on stderr for the library calls that report progress
//! through callbacks.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `len` steps drawn with `template` (indicatif's syntax).
pub fn bar(len: u64, template: &str) -> ProgressBar {
    ProgressBar::new(len).with_style(
        ProgressStyle::with_template(template)
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

/// A spinner on stderr drawn with `template`.
pub fn spinner(template: &str) -> ProgressBar {
    ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        .with_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_spinner()))
}

/// A spinner for subgraphs being timed, and the callback that tells it
/// how many were timed and how many read from the database.
pub fn timing_spinner() -> (ProgressBar, Box<dyn Fn(usize, usize)>) {
    let bar = spinner("{spinner} timing subgraphs {msg} [{elapsed}]");
    let ticks = bar.clone();
    let tell = move |timed, reused| {
        ticks.set_message(format!("({timed} timed, {reused} from the database)"));
        ticks.tick();
    };
    (bar, Box::new(tell))
}

/// `bench`'s timing loop drawn as a bar.
pub struct Runs(pub ProgressBar);

impl scheduler_rt::timing::interleave::Progress for Runs {
    fn begin(&self, runs: u64) {
        self.0.set_length(runs);
    }
    fn phase(&self, what: String) {
        self.0.set_message(what);
    }
    fn advance(&self) {
        self.0.inc(1);
    }
}
