//! An OTF2 archive ([`crate::reading::otf2`]): its anchor `*.otf2`, or a directory holding one. Its
//! ranks sit in files of their own, so a conversion reads a group of them at a time.

use std::path::{Path, PathBuf};

use super::{Format, Grouping, Measured, has_extension, refuse_time_unit};
use crate::convert::{Converted, Limits};
use crate::error::Result;
use crate::reading::{OpenOptions, build_later, default_name, otf2, paths::otf2_name_source};
use crate::trace::Trace;

pub struct Otf2;

impl Format for Otf2 {
    fn names(&self) -> &'static [&'static str] {
        &["otf2"]
    }

    fn described(&self) -> &'static str {
        "an OTF2 archive (its *.otf2 anchor or directory)"
    }

    fn what(&self) -> &'static str {
        "an OTF2 archive"
    }

    fn recognises(&self, path: &Path) -> bool {
        has_extension(path, "otf2")
            || (path.is_dir()
                && std::fs::read_dir(path)
                    .map(|entries| entries.flatten().any(|e| has_extension(&e.path(), "otf2")))
                    .unwrap_or(false))
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Trace> {
        open_from(path, options, None)
    }

    fn grouping(&self) -> Option<&dyn Grouping> {
        Some(self)
    }
}

/// Open the archive at `path`, from its global definitions when they were read already.
fn open_from(path: &Path, options: &OpenOptions, global: Option<otf2::Global>) -> Result<Trace> {
    refuse_time_unit(&path.display().to_string(), Otf2.what(), options)?;
    let (mut raw, source) = match global {
        Some(global) => otf2::read_definitions_from(path, global)?,
        None => otf2::read_definitions(path)?,
    };
    if let Some(nodes_file) = &options.nodes {
        crate::reading::csv::nodes::apply(nodes_file, &mut raw.ranks)?;
    }
    raw.meta.name = default_name(&otf2_name_source(path));
    build_later(raw, Some(source), options)
}

impl Grouping for Otf2 {
    /// The events the global definitions give, and the definitions, which opening goes on from.
    fn measure(&self, path: &Path) -> Result<Measured> {
        let global = otf2::Global::read(path)?;
        Ok(Measured { events: global.events(), read: Some(Box::new(global)) })
    }

    fn open_measured(
        &self,
        _format: &dyn Format,
        path: &Path,
        options: &OpenOptions,
        read: Box<dyn std::any::Any + Send>,
    ) -> Result<Trace> {
        match read.downcast::<otf2::Global>() {
            Ok(global) => open_from(path, options, Some(*global)),
            Err(_) => open_from(path, options, None),
        }
    }

    fn convert(&self, path: &Path, dir: &Path, options: &OpenOptions, limits: &Limits) -> Result<Converted> {
        crate::convert::otf2(path, dir, options, limits)
    }

    fn convert_measured(
        &self,
        path: &Path,
        dir: &Path,
        options: &OpenOptions,
        limits: &Limits,
        read: Box<dyn std::any::Any + Send>,
    ) -> Result<Converted> {
        match read.downcast::<otf2::Global>() {
            Ok(global) => crate::convert::otf2_from(path, *global, dir, options, limits),
            Err(_) => crate::convert::otf2(path, dir, options, limits),
        }
    }

    fn anchor(&self, path: &Path) -> Result<PathBuf> {
        otf2::find_anchor(path)
    }

    /// The global definitions and every file of the directory of locations, in name order.
    fn companions(&self, anchor: &Path) -> Vec<PathBuf> {
        let mut files = vec![anchor.with_extension("def")];
        if let Ok(entries) = std::fs::read_dir(anchor.with_extension("")) {
            let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            files.extend(paths);
        }
        files
    }

    fn cache_name(&self, anchor: &Path) -> String {
        default_name(&otf2_name_source(anchor))
    }
}
