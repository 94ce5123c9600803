//! Panics of the inference engines: the runtime catches a panic of an engine
//! run and reports it as an error, so the panic's own text and backtrace are
//! kept off stderr; `println!` failing on a closed output ends the command
//! quietly; every other panic is a bug of ours and is reported as usual.

use std::panic::PanicHookInfo;
use std::sync::Mutex;

/// Crates whose panics are engine failures: path segments of their sources
/// (`tract-core-0.23.9`) and prefixes of their symbols (`tract_core::`).
const ENGINES: [(&str, &str); 2] = [("tract-", "tract_"), ("ort-", "ort::")];

/// The message of the last engine panic kept quiet, for [`escaped`].
static LAST: Mutex<Option<String>> = Mutex::new(None);

/// Installs a hook that stays silent for panics raised inside an engine and
/// hands every other panic to the default hook.
pub fn quiet_engine_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload_as_str().is_some_and(stdout_closed) {
            return;
        }
        if from_engine(info) {
            if let Ok(mut last) = LAST.lock() {
                *last = Some(info.payload_as_str().unwrap_or("non-text payload").to_string());
            }
        } else {
            default(info);
        }
    }));
}

/// Whether a panic's message is `println!` failing because whoever read the
/// output (`stretch fit ... | head`) has closed it: the command stops there
/// without a word, as `inspect` does on the same error.
pub fn stdout_closed(message: &str) -> bool {
    message.starts_with("failed printing to stdout") && message.contains("Broken pipe")
}

/// The text of a panic's payload.
pub fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-text payload".into())
}

/// The message of `payload` when it is the last engine panic the hook kept
/// quiet: such a panic escaped to `main` instead of being turned into an
/// error by the runtime, and nothing about it was printed yet.
pub fn escaped(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    let text = payload_text(payload);
    let last = LAST.lock().ok()?.take()?;
    (last == text).then_some(text)
}

fn from_engine(info: &PanicHookInfo) -> bool {
    if info.location().is_some_and(|l| in_engine_source(l.file())) {
        return true;
    }
    let trace = std::backtrace::Backtrace::force_capture().to_string();
    trace.lines().any(|l| {
        let frame = l.trim_start();
        let symbol = frame.split_once(": ").map_or("", |(_, s)| s);
        frame.starts_with(|c: char| c.is_ascii_digit()) && ENGINES.iter().any(|(_, s)| symbol.starts_with(s))
    })
}

/// Whether `file` is a source file of an engine crate.
fn in_engine_source(file: &str) -> bool {
    file.split(['/', '\\'])
        .any(|seg| ENGINES.iter().any(|(p, _)| engine_dir(seg, p)))
}

/// `seg` is `PREFIX[name-]<version>`, the directory cargo unpacks a crate in.
fn engine_dir(seg: &str, prefix: &str) -> bool {
    seg.strip_prefix(prefix).is_some_and(|rest| {
        rest.split('-')
            .any(|part| part.starts_with(|c: char| c.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::in_engine_source;

    #[test]
    fn engine_sources_are_recognised_by_their_crate_directory() {
        assert!(in_engine_source(
            "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tract-core-0.23.9/src/ops/array/pad.rs"
        ));
        assert!(in_engine_source(
            "C:\\cargo\\registry\\src\\x\\ort-2.0.0-rc.15\\src\\session.rs"
        ));
        assert!(!in_engine_source("crates/scheduler-rt/src/engine.rs"));
        assert!(!in_engine_source("crates/stretch-cli/src/tract-notes/main.rs"));
    }
}
