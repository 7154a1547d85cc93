//! A Paraver trace ([`crate::reading::paraver`]): its `.prv` (or `.prv.gz`) with the `.pcf` and
//! `.row` beside it, or a directory holding one. A conversion splits it by runs of whole tasks
//! first, then reads a group of them at a time.

use std::path::{Path, PathBuf};

use super::{Format, Grouping, Measured, refuse_time_unit};
use crate::convert::{Converted, Limits};
use crate::error::Result;
use crate::reading::{OpenOptions, build_later, paraver};
use crate::trace::Trace;

pub struct Paraver;

impl Format for Paraver {
    fn names(&self) -> &'static [&'static str] {
        &["paraver", "prv"]
    }

    fn described(&self) -> &'static str {
        "a Paraver trace (*.prv or *.prv.gz with its .pcf and .row, or their directory)"
    }

    fn what(&self) -> &'static str {
        "a Paraver trace"
    }

    fn recognises(&self, path: &Path) -> bool {
        paraver::is_prv(path)
            || (path.is_dir()
                && std::fs::read_dir(path)
                    .map(|entries| entries.flatten().any(|e| paraver::is_prv(&e.path())))
                    .unwrap_or(false))
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Trace> {
        refuse_time_unit(&path.display().to_string(), self.what(), options)?;
        let mut raw = paraver::read_with_progress(path, options.progress.as_deref())?;
        if let Some(nodes_file) = &options.nodes {
            crate::reading::csv::nodes::apply(nodes_file, &mut raw.ranks)?;
        }
        build_later(raw, None, options)
    }

    fn grouping(&self) -> Option<&dyn Grouping> {
        Some(self)
    }
}

impl Grouping for Paraver {
    fn measure(&self, path: &Path) -> Result<Measured> {
        Ok(Measured { events: paraver::pieces::events_estimated(path)?, read: None })
    }

    fn convert(&self, path: &Path, dir: &Path, options: &OpenOptions, limits: &Limits) -> Result<Converted> {
        crate::convert::paraver(path, dir, options, limits)
    }

    fn anchor(&self, path: &Path) -> Result<PathBuf> {
        paraver::find_prv(path)
    }

    /// The `.pcf` and `.row` beside the `.prv`, those that exist.
    fn companions(&self, anchor: &Path) -> Vec<PathBuf> {
        ["pcf", "row"].iter().map(|ext| paraver::companion(anchor, ext)).filter(|p| p.exists()).collect()
    }
}
