//! A CSV trace ([`crate::reading::csv`]) of either shape: PCLVis events or an event export. Its
//! rows may come in any order, so a conversion parses them into a scratch file first, then
//! reads a group of whole ranks at a time.

use std::path::Path;

use super::{Format, Grouping, Measured, has_extension};
use crate::convert::{Converted, Limits};
use crate::error::Result;
use crate::reading::{OpenOptions, build_later, csv, default_name};
use crate::trace::Trace;

pub struct Csv;

impl Format for Csv {
    fn names(&self) -> &'static [&'static str] {
        &["csv"]
    }

    fn described(&self) -> &'static str {
        "a CSV trace (*.csv: PCLVis events or an event export)"
    }

    fn what(&self) -> &'static str {
        "a CSV trace"
    }

    fn recognises(&self, path: &Path) -> bool {
        path.is_file() && has_extension(path, "csv")
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Trace> {
        let options_csv = csv::CsvOptions {
            time_unit: options.time_unit,
            nodes: options.nodes.clone(),
            progress: options.progress.clone(),
        };
        let mut raw = csv::read(path, &options_csv)?;
        raw.meta.name = default_name(path.to_string_lossy().as_ref());
        raw.meta.path = path.display().to_string();
        build_later(raw, None, options)
    }

    fn grouping(&self) -> Option<&dyn Grouping> {
        Some(self)
    }
}

impl Grouping for Csv {
    fn measure(&self, path: &Path) -> Result<Measured> {
        Ok(Measured { events: csv::pieces::events_estimated(path)?, read: None })
    }

    fn convert(&self, path: &Path, dir: &Path, options: &OpenOptions, limits: &Limits) -> Result<Converted> {
        crate::convert::csv(path, dir, options, limits)
    }

    fn has_time_unit(&self) -> bool {
        false
    }
}
