//! The OTF2 anchor file (`traces.otf2`): format and library version, chunk sizes, number of
//! locations and definitions, creator. Layout (1.x to 3.x alike): 0x03, an endianness byte,
//! "OTF2\0", anchor format, trace format, version major/minor/bugfix, then full-width u64
//! chunk sizes, substrate and compression bytes, u64 location and definition counts, the
//! machine, creator and description strings; from anchor format 2 on (OTF2 1.2 and later), a
//! u32 count of properties (name and value strings each) and the u64 trace id, as the
//! reference library's `OTF2_AnchorFile.c` reads them. An anchor that ends before these is
//! reported as cut short.

use std::path::Path;

use crate::error::{Error, Result};
use crate::reading::otf2::buffer::Cursor;

/// What the anchor says about an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub version: String,
    pub chunk_size_events: u64,
    pub chunk_size_definitions: u64,
    pub locations: u64,
    pub global_definitions: u64,
    pub creator: String,
    pub big_endian: bool,
}

pub fn read(path: &Path) -> Result<Anchor> {
    let data = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if data.len() < 8 || data[0] != 0x03 || &data[2..7] != b"OTF2\0" {
        return Err(Error::at_offset(
            path,
            0,
            "not an OTF2 anchor file (expected 0x03, an endianness byte and \"OTF2\")",
        ));
    }
    let big_endian = match data[1] {
        0x42 => false,
        0x23 => true,
        b => return Err(Error::at_offset(path, 1, format!("unknown endianness byte 0x{b:02x} in the anchor"))),
    };
    let mut c = Cursor::plain(&data, path, 7, big_endian);
    c.record = "anchor";
    // An anchor that ends before its last field (the trace id) was cut short (a copy that
    // stopped, a full disk): say so, and where.
    let size = data.len();
    let ends_early = |field: &'static str| {
        move |_: Error| {
            Error::at_offset(
                path,
                size as u64,
                format!("the anchor file ends early, in its {field} (truncated? it has {size} bytes)"),
            )
        }
    };
    let header = ends_early("header");
    let anchor_format = c.u8().map_err(header)?;
    let _trace_format = c.u8().map_err(header)?;
    let (major, minor, bugfix) = (c.u8().map_err(header)?, c.u8().map_err(header)?, c.u8().map_err(header)?);
    if anchor_format == 0 || major == 0 || major > 3 {
        return Err(Error::at_offset(
            path,
            9,
            format!(
                "OTF2 version {major}.{minor}.{bugfix} (anchor format {anchor_format}) is not one this reader knows (1.x to 3.x are)"
            ),
        ));
    }
    let chunk_size_events = c.u64_full().map_err(header)?;
    let chunk_size_definitions = c.u64_full().map_err(header)?;
    let _substrate = c.u8().map_err(header)?;
    let compression = c.u8().map_err(header)?;
    let locations = c.u64_full().map_err(header)?;
    let global_definitions = c.u64_full().map_err(header)?;
    let _machine = c.string().map_err(ends_early("machine name"))?;
    let creator = c.string().map_err(ends_early("creator"))?;
    let _description = c.string().map_err(ends_early("description"))?;
    if anchor_format > 1 {
        let properties = c.u32_full().map_err(ends_early("number of properties"))?;
        for _ in 0..properties {
            c.string().map_err(ends_early("properties"))?;
            c.string().map_err(ends_early("properties"))?;
        }
        let _trace_id = c.u64_full().map_err(ends_early("trace id"))?;
    }
    if compression > 1 {
        return Err(Error::at_offset(path, 29, "compressed OTF2 archives are not supported"));
    }
    if chunk_size_events < 32 || chunk_size_definitions < 32 {
        return Err(Error::at_offset(path, 12, "implausible chunk sizes in the anchor"));
    }
    Ok(Anchor {
        version: format!("{major}.{minor}.{bugfix}"),
        chunk_size_events,
        chunk_size_definitions,
        locations,
        global_definitions,
        creator,
        big_endian,
    })
}
