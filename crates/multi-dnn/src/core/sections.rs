//! What an extension adds to a run's log and to its report without the
//! core knowing it: a [`LogSection`] kept in the
//! [`RunLog`](crate::core::report::RunLog) by type, and a [`Section`] a
//! [`Report`](crate::core::report::Report) serialises after its own fields
//! and prints at the section's [`Place`].

use crate::core::report::Report;
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

/// What an extension records during a run, one value per type in a log.
pub trait LogSection: Any + Clone + Debug + Default + Send + Sync {
    /// Appends a later run's record, its times shifted by `offset_ms`
    /// ([`RunLog::append`](crate::core::report::RunLog::append)).
    fn append(&mut self, other: Self, offset_ms: f64);
}

trait ErasedLog: Any + Debug + Send + Sync {
    fn append_erased(&mut self, other: Box<dyn ErasedLog>, offset_ms: f64);
    fn clone_erased(&self) -> Box<dyn ErasedLog>;
    fn empty_erased(&self) -> Box<dyn ErasedLog>;
}

impl<T: LogSection> ErasedLog for T {
    fn append_erased(&mut self, other: Box<dyn ErasedLog>, offset_ms: f64) {
        let other: Box<dyn Any> = other;
        if let Ok(other) = other.downcast::<T>() {
            self.append(*other, offset_ms);
        }
    }

    fn clone_erased(&self) -> Box<dyn ErasedLog> {
        Box::new(self.clone())
    }

    fn empty_erased(&self) -> Box<dyn ErasedLog> {
        Box::new(T::default())
    }
}

/// A log's extension records, at most one per type.
#[derive(Debug, Default)]
pub struct LogSections(Vec<Box<dyn ErasedLog>>);

impl Clone for LogSections {
    fn clone(&self) -> LogSections {
        LogSections(self.0.iter().map(|s| s.clone_erased()).collect())
    }
}

impl LogSections {
    /// The record of type `T`, if one was made.
    pub fn get<T: LogSection>(&self) -> Option<&T> {
        self.0.iter().find_map(|s| {
            let s: &dyn Any = s.as_ref();
            s.downcast_ref::<T>()
        })
    }

    /// The record of type `T`, made empty if there is none yet.
    pub fn get_mut<T: LogSection>(&mut self) -> &mut T {
        let at = self.0.iter().position(|s| {
            let s: &dyn Any = s.as_ref();
            s.is::<T>()
        });
        let at = at.unwrap_or_else(|| {
            self.0.push(Box::new(T::default()));
            self.0.len() - 1
        });
        let s: &mut dyn Any = self.0[at].as_mut();
        s.downcast_mut::<T>().expect("the record of this type")
    }

    /// Appends `other`'s records to those of the same type (or adds them).
    pub fn append(&mut self, other: LogSections, offset_ms: f64) {
        for s in other.0 {
            let id = (*s).type_id();
            match self.0.iter_mut().find(|x| (***x).type_id() == id) {
                Some(x) => x.append_erased(s, offset_ms),
                None => {
                    let mut fresh = s.empty_erased();
                    fresh.append_erased(s, offset_ms);
                    self.0.push(fresh);
                }
            }
        }
    }
}

/// Where a section's lines go in [`Report::text`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Right after the totals line: the host the run ran on.
    Host,
    /// After the host's lines: what the run's extensions did.
    Run,
    /// After the output checks.
    Checks,
}

/// A part of a report an extension adds ([`Report::add`]): serialised under
/// [`Section::key`] after the core's fields, in the order added.
pub trait Section: erased_serde::Serialize + Any + Debug + Send + Sync {
    fn key(&self) -> &'static str;
    fn place(&self) -> Place;
    /// What [`Report::text`] prints at [`Section::place`] (whole lines, each
    /// ending in a newline); `report` gives the apps.
    fn text(&self, report: &Report) -> String;
}

/// A report's sections, in the order added.
#[derive(Clone, Debug, Default)]
pub struct Sections(Vec<Arc<dyn Section>>);

impl Sections {
    pub fn push(&mut self, section: impl Section) {
        self.0.push(Arc::new(section));
    }

    /// The section of type `T`, if one was added.
    pub fn get<T: Section>(&self) -> Option<&T> {
        self.0.iter().find_map(|s| {
            let s: &dyn Any = s.as_ref();
            s.downcast_ref::<T>()
        })
    }

    /// The text of every section at `place`, in order.
    pub fn text(&self, report: &Report, place: Place) -> String {
        self.0
            .iter()
            .filter(|s| s.place() == place)
            .map(|s| s.text(report))
            .collect()
    }
}

impl Serialize for Sections {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for s in &self.0 {
            let value: &dyn erased_serde::Serialize = s.as_ref();
            map.serialize_entry(s.key(), value)?;
        }
        map.end()
    }
}
