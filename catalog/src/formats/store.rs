//! A commdb store: a directory of Parquet tables with its manifest ([`crate::store`]). Its times
//! were corrected and its ranks placed when it was converted, so options that would do that
//! again are refused.

use std::path::Path;

use super::{Format, refuse_time_unit};
use crate::clock::Correction;
use crate::error::{Error, Result};
use crate::reading::OpenOptions;
use crate::trace::Trace;

pub struct Store;

impl Format for Store {
    fn names(&self) -> &'static [&'static str] {
        &["parquet", "store"]
    }

    fn described(&self) -> &'static str {
        "a commdb store directory"
    }

    fn what(&self) -> &'static str {
        "a commdb store"
    }

    fn recognises(&self, path: &Path) -> bool {
        path.is_dir() && crate::store::is_store(path)
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Trace> {
        let shown = path.display();
        if options.clock_sync.is_some() {
            return Err(Error::argument(format!(
                "{shown} is a commdb store, whose times were corrected when it was converted; give the clock sync file when converting the source trace"
            )));
        }
        refuse_time_unit(&shown.to_string(), self.what(), options)?;
        if options.nodes.is_some() {
            return Err(Error::argument(format!(
                "{shown} is a commdb store, whose messages were placed on nodes when it was converted; give the nodes file when converting the source trace"
            )));
        }
        let trace = crate::store::read_with_progress(path, options.progress.as_deref())?;
        if options.clock_correction != Correction::Model {
            let asked = options.clock_correction.name();
            let has = trace.meta.clock_correction.as_str();
            let same = has == asked || (asked == "off" && has == "none");
            if !same {
                return Err(Error::argument(format!(
                    "{shown} is a commdb store whose times were corrected with '{has}' when it was converted; clock correction '{asked}' cannot be applied to it: convert the source trace with --clock-correction {asked}"
                )));
            }
        }
        Ok(trace)
    }
}
