//! What `stretch train` prints while it trains: one progress bar per
//! training in flight and a line per epoch.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use training::data::Dataset;
use training::{EpochMetrics, Progress, Session};

use crate::recipe_args::RecipeArgs;

/// Every training's progress bars draw through this one display, so models
/// trained side by side (`compare-accuracy --jobs`) keep a line each.
fn bars() -> &'static MultiProgress {
    static BARS: std::sync::OnceLock<MultiProgress> = std::sync::OnceLock::new();
    BARS.get_or_init(MultiProgress::new)
}

/// Prints a line above the progress bars of every training in flight.
pub(crate) fn say(line: String) {
    bars().suspend(|| println!("{line}"));
}

pub(crate) struct Bar<'a> {
    pub label: &'a str,
    pub bar: Option<ProgressBar>,
}

impl Progress for Bar<'_> {
    fn epoch_started(&mut self, epoch: usize, batches: usize) {
        let bar = ProgressBar::new(batches as u64).with_style(
            ProgressStyle::with_template("{prefix} {bar:30} {pos}/{len} batches, loss {msg} [{elapsed}<{eta}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(format!("{} epoch {epoch}", self.label));
        self.bar = Some(bars().add(bar));
    }

    fn batch_done(&mut self, loss: f64) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{loss:.4}"));
            b.inc(1);
        }
    }

    fn epoch_done(&mut self, _: &EpochMetrics) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
            bars().remove(&b);
        }
    }
}

/// What a training session works on, in a line.
pub(crate) fn setup_line(label: &str, session: &Session, set: &dyn Dataset, args: &RecipeArgs) -> String {
    let t = session.transform();
    format!(
        "{label}: {} training / {} validation images ({}), normalised with mean {:?} std {:?}; {} on {} thread(s), {} autograd, {} convolution weight gradients",
        session.split().train.len(),
        session.split().val.len(),
        if set.test_start().is_some() {
            "the dataset's test split"
        } else {
            "a seeded random split"
        },
        t.mean.iter().map(|v| (v * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
        t.std.iter().map(|v| (v * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
        args.backend,
        if args.threads == 0 {
            "all".to_string()
        } else {
            args.threads.to_string()
        },
        session.autograd(),
        session.conv_grad(),
    )
}

/// One epoch's figures, in a line.
pub(crate) fn epoch_line(label: &str, m: &EpochMetrics, epochs: usize) -> String {
    let kd = m
        .kd_loss
        .map_or(String::new(), |k| format!(" (distillation term {k:.4})"));
    format!(
        "{label} epoch {:>3}/{epochs}  lr {:.4}  train loss {:.4}{kd} top-1 {:5.1}%  val loss {:.4} top-1 {:5.1}% top-5 {:5.1}%  {:.1} s ({:.0} img/s)",
        m.epoch, m.lr, m.train_loss, m.train_top1, m.val_loss, m.val_top1, m.val_top5, m.seconds, m.images_per_second
    )
}

pub(crate) fn empty(epoch: usize) -> EpochMetrics {
    EpochMetrics {
        epoch,
        lr: 0.0,
        train_loss: f64::NAN,
        train_top1: 0.0,
        val_loss: f64::NAN,
        val_top1: 0.0,
        val_top5: 0.0,
        seconds: 0.0,
        images_per_second: 0.0,
        kd_loss: None,
    }
}
