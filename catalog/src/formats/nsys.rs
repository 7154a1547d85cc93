//! An Nsight Systems export ([`crate::reading::nsys`]): the SQLite file `nsys export --type sqlite`
//! writes, or a directory of them (one per rank). It is read whole.

use std::path::Path;

use super::{Format, refuse_time_unit};
use crate::error::Result;
use crate::reading::{OpenOptions, build_later, nsys};
use crate::trace::Trace;

pub struct Nsys;

impl Format for Nsys {
    fn names(&self) -> &'static [&'static str] {
        &["nsys", "nsight"]
    }

    fn described(&self) -> &'static str {
        "an Nsight Systems SQLite export (*.sqlite from nsys export --type sqlite, or a directory of them)"
    }

    fn what(&self) -> &'static str {
        "an Nsight Systems export"
    }

    fn recognises(&self, path: &Path) -> bool {
        nsys::recognises(path)
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Trace> {
        refuse_time_unit(&path.display().to_string(), self.what(), options)?;
        let mut raw = nsys::read(path)?;
        if let Some(nodes_file) = &options.nodes {
            crate::reading::csv::nodes::apply(nodes_file, &mut raw.ranks)?;
        }
        build_later(raw, None, options)
    }
}
