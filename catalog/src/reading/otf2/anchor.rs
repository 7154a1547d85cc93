//! The OTF2 anchor file (`traces.otf2`): format and library version, chunk sizes, number of
//! locations and definitions, creator. Layout (2.x and 3.x alike): 0x03, an endianness byte,
//! "OTF2\0", anchor version, trace format, version major/minor/bugfix, then full-width u64
//! chunk sizes, substrate and compression bytes, u64 location and definition counts, and the
//! machine, creator and description strings.

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
    let _anchor_version = c.u8()?;
    let _trace_format = c.u8()?;
    let (major, minor, bugfix) = (c.u8()?, c.u8()?, c.u8()?);
    let chunk_size_events = c.u64_full()?;
    let chunk_size_definitions = c.u64_full()?;
    let _substrate = c.u8()?;
    let compression = c.u8()?;
    let locations = c.u64_full()?;
    let global_definitions = c.u64_full()?;
    let _machine = c.string()?;
    let creator = c.string()?;
    if major < 2 {
        return Err(Error::at_offset(
            path,
            9,
            format!("OTF2 version {major}.{minor}.{bugfix} is not supported (2.x and 3.x are)"),
        ));
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
