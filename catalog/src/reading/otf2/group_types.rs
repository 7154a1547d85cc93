//! OTF2's group types and flags (`OTF2_GroupType`, `OTF2_GroupFlag`) as a Group definition
//! writes them since OTF2 1.2: what `defs` reads, what `older` maps the types of OTF2 1.0 and
//! 1.1 onto, and what the writer writes.

pub const GROUP_LOCATIONS: u8 = 1;
pub const GROUP_REGIONS: u8 = 2;
pub const GROUP_METRIC: u8 = 3;
pub const GROUP_COMM_LOCATIONS: u8 = 4;
pub const GROUP_COMM_GROUP: u8 = 5;
pub const GROUP_COMM_SELF: u8 = 6;
/// Group flag: a COMM_GROUP that lists no members and holds every rank of its paradigm's
/// COMM_LOCATIONS group.
pub const GROUP_FLAG_GLOBAL_MEMBERS: u32 = 1;
