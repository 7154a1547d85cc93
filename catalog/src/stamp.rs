//! Which writing of a store a trace was opened from: the identity of the store's manifest file,
//! so that a query notices a store converted again at the same path while it was open and says
//! so, rather than read files of two writings (crate's `store`, which writes and reads stores).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The file of a store's directory that names its tables and their files.
pub const MANIFEST: &str = "manifest.json";

/// Which writing of a store is at its directory: the identity of its manifest file (device,
/// inode, size, modification time). `StoreWriter::finish` puts a new directory in the old one's
/// place, so a store converted again at the same path has a new manifest file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    dir: PathBuf,
    identity: (u64, u64, u64, Option<std::time::SystemTime>),
}

impl Stamp {
    /// The stamp of the store at `dir` now (None when its manifest cannot be read).
    pub fn of(dir: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(dir.join(MANIFEST)).ok()?;
        #[cfg(unix)]
        let (dev, ino) = {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        };
        #[cfg(not(unix))]
        let (dev, ino) = (0, 0);
        Some(Stamp { dir: dir.to_path_buf(), identity: (dev, ino, m.len(), m.modified().ok()) })
    }

    /// Whether the store at the stamp's directory is still the one stamped.
    pub fn holds(&self) -> bool {
        Stamp::of(&self.dir).as_ref() == Some(self)
    }

    /// The error a query gets when the store it reads was replaced (converted again) after
    /// the trace was opened, or while the query read it.
    pub fn replaced(&self) -> Error {
        Error::in_file(
            &self.dir,
            "the store was replaced while this query read it (converted again at this path after it was opened): open it again (DETACH and ATTACH, or \\open) to read the new one",
        )
    }

    /// Err(replaced) when the store is no longer the one stamped.
    pub fn check(&self) -> Result<()> {
        if self.holds() { Ok(()) } else { Err(self.replaced()) }
    }
}
