//! The one list of policies. Each policy's file declares its
//! [`PolicyEntry`] (name, aliases, what it needs, constructor);
//! [`Registry::builtin`] lists them, and everything that turns a name into
//! a policy (the commands, their `--help` and errors, the experiments)
//! asks a [`Registry`].

use crate::core::workload::Workload;
use crate::heimdall::{self, fifo, utility};
use crate::policy::{Policy, PolicyEntry, PolicyOptions, fixed, heft, lst, round_robin, sel};
use crate::splash::{max_weighted_ppt, min_heat};
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum PolicyError {
    #[error("unknown policy '{name}' (known: {known})")]
    Unknown { name: String, known: String },
    #[error("policy '{name}' {reason}")]
    Options { name: String, reason: String },
    #[error(
        "policy '{name}' schedules by temperature: give --thermal (with a runtime configuration that has a [thermal] section)"
    )]
    NeedsThermal { name: String },
}

/// Policies by name.
#[derive(Clone, Debug)]
pub struct Registry {
    entries: Vec<PolicyEntry>,
    configure: Vec<Configure>,
    /// The policy a run takes when none is named: without and with a
    /// rendering task.
    defaults: [&'static str; 2],
}

/// How an extension sets its policies' options from a workload on
/// processors `names` (in worker order).
pub type Configure = fn(&Workload, &[String], &mut PolicyOptions);

impl Registry {
    /// Every policy this crate implements, Band's first.
    pub fn builtin() -> Registry {
        let mut entries = vec![
            fixed::ENTRY,
            round_robin::ENTRY,
            sel::ENTRY,
            heft::ENTRY,
            lst::ENTRY,
            lst::WHOLE,
        ];
        entries.extend([min_heat::ENTRY, max_weighted_ppt::ENTRY]);
        entries.extend(fifo::ENTRIES);
        entries.extend(utility::ENTRIES);
        Registry {
            entries,
            configure: vec![heimdall::options::configure],
            defaults: [lst::ENTRY.name, utility::ENTRIES[1].name],
        }
    }

    /// This registry with `entry` added (replacing one of the same name).
    pub fn with(mut self, entry: PolicyEntry) -> Registry {
        self.entries.retain(|e| e.name != entry.name);
        self.entries.push(entry);
        self
    }

    /// This registry with `configure` also setting options from a workload.
    pub fn configured_by(mut self, configure: Configure) -> Registry {
        self.configure.push(configure);
        self
    }

    /// What `workload` configures on processors `names` (in worker order):
    /// the core's options ([`PolicyOptions::for_workload`]), then each
    /// extension's.
    pub fn options_for(&self, workload: &Workload, names: &[String]) -> PolicyOptions {
        let mut options = PolicyOptions::for_workload(workload, names);
        for c in &self.configure {
            c(workload, names, &mut options);
        }
        options
    }

    pub fn entries(&self) -> &[PolicyEntry] {
        &self.entries
    }

    /// The entry answering to `name` (its name or an alias).
    pub fn get(&self, name: &str) -> Option<&PolicyEntry> {
        self.entries.iter().find(|e| e.answers_to(name))
    }

    /// Checks that every policy of `names` can be made with `options`, and
    /// that none needs a thermal model unless `thermal`.
    pub fn check(&self, names: &[String], options: &PolicyOptions, thermal: bool) -> Result<(), PolicyError> {
        for name in names {
            self.make(name, options)?;
            if !thermal && self.get(name).is_some_and(|e| e.needs.thermal) {
                return Err(PolicyError::NeedsThermal { name: name.clone() });
            }
        }
        Ok(())
    }

    /// Makes the policy called `name`.
    pub fn make(&self, name: &str, options: &PolicyOptions) -> Result<Box<dyn Policy>, PolicyError> {
        let entry = self.get(name).ok_or_else(|| PolicyError::Unknown {
            name: name.into(),
            known: self.known(),
        })?;
        (entry.make)(options).map_err(|reason| PolicyError::Options {
            name: entry.name.into(),
            reason,
        })
    }

    /// Names, in registry order, of the policies whose entry satisfies `keep`.
    pub fn names_where(&self, keep: impl Fn(&PolicyEntry) -> bool) -> Vec<&'static str> {
        self.entries.iter().filter(|e| keep(e)).map(|e| e.name).collect()
    }

    /// Policies that need neither a thermal model nor a rendering task.
    pub fn plain_names(&self) -> Vec<&'static str> {
        self.names_where(|e| !e.needs.thermal && !e.needs.render)
    }

    /// Policies that need a thermal model (Splash's).
    pub fn thermal_names(&self) -> Vec<&'static str> {
        self.names_where(|e| e.needs.thermal)
    }

    /// Policies that need a rendering task (Heimdall's and its baselines).
    pub fn render_names(&self) -> Vec<&'static str> {
        self.names_where(|e| e.needs.render)
    }

    /// The policy a run takes when none is named, for a workload with a
    /// rendering task (`render`) or without.
    pub fn default_policy(&self, render: bool) -> &'static str {
        self.defaults[usize::from(render)]
    }

    /// This registry with `plain` and `render` the policies runs take when
    /// none is named, without and with a rendering task.
    pub fn with_defaults(mut self, plain: &'static str, render: &'static str) -> Registry {
        self.defaults = [plain, render];
        self
    }

    /// `--policy`'s help: the policies without and with a rendering task
    /// (each with its aliases) and the defaults.
    pub fn policy_help(&self) -> String {
        format!(
            "Scheduling policy: {}; for workloads with a render task (Heimdall): {}. Default: {}, or {} for a workload with a render task",
            self.listed(|e| !e.needs.thermal && !e.needs.render),
            self.listed(|e| e.needs.render),
            self.default_policy(false),
            self.default_policy(true)
        )
    }

    /// The policies a thermal run takes (all but those that need a
    /// rendering task), each with its aliases, comma-separated.
    pub fn thermal_run_list(&self) -> String {
        self.listed(|e| !e.needs.render)
    }

    /// The thermal policies' names as prose: `a`, `a and b`, `a, b and c`.
    pub fn thermal_prose(&self) -> String {
        let names = self.thermal_names();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }

    /// `name (alias, ...)` of each entry that satisfies `keep`, comma-separated.
    fn listed(&self, keep: impl Fn(&PolicyEntry) -> bool) -> String {
        self.entries
            .iter()
            .filter(|e| keep(e))
            .map(|e| match e.aliases {
                [] => e.name.to_string(),
                a => format!("{} ({})", e.name, a.join(", ")),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One line per policy: name, aliases and summary, for `--help`.
    /// The names in a line: plain ones with their aliases, the thermal
    /// ones, and those that need a render task.
    pub fn known(&self) -> String {
        let plain: Vec<&str> = self
            .entries
            .iter()
            .filter(|e| !e.needs.thermal && !e.needs.render)
            .flat_map(|e| std::iter::once(e.name).chain(e.aliases.iter().copied()))
            .collect();
        format!(
            "{}; in thermal runs also {}; with a render task: {}",
            plain.join(", "),
            self.thermal_names().join(", "),
            self.render_names().join(", ")
        )
    }

    pub fn help(&self) -> String {
        self.entries
            .iter()
            .map(|e| {
                let aliases = if e.aliases.is_empty() {
                    String::new()
                } else {
                    format!(" (or {})", e.aliases.join(", "))
                };
                format!("{}{aliases}: {}", e.name, e.summary)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// [`Registry::builtin`]'s policy called `name`, `None` for an unknown
/// name or options that lack what it needs.
pub fn policy_by_name(name: &str, options: &PolicyOptions) -> Option<Box<dyn Policy>> {
    Registry::builtin().make(name, options).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_makes_the_policy_it_names() {
        let r = Registry::builtin();
        let options = PolicyOptions::default().with(crate::heimdall::HeimdallOptions {
            offload: Some((0, 1, 0.1, 100.0)),
            ..Default::default()
        });
        for e in r.entries() {
            let p = r.make(e.name, &options).unwrap();
            let expect = match e.name {
                "whole" | "ops5" => "fifo",
                "lst-whole" => "lst",
                n => n,
            };
            assert_eq!(p.name(), expect);
        }
        assert_eq!(r.make("rr", &options).unwrap().name(), "round-robin");
        assert!(matches!(r.make("nope", &options), Err(PolicyError::Unknown { .. })));
        assert!(matches!(
            r.make("whole", &PolicyOptions::default()),
            Err(PolicyError::Options { .. })
        ));
    }

    #[test]
    fn names_are_unique() {
        let r = Registry::builtin();
        let mut all: Vec<&str> = r
            .entries()
            .iter()
            .flat_map(|e| std::iter::once(e.name).chain(e.aliases.iter().copied()))
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
