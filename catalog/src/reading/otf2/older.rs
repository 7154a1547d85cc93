//! Definitions as OTF2 1.0 and 1.1 wrote them, read as today's. A Region record of OTF2 1.0
//! has a region type where later versions have a role and a paradigm (OTF2 1.1 added them at
//! the record's end); a Group record before OTF2 1.2 has a type that also says MPI, where later
//! versions have a type, a paradigm and flags. The mapping is the one the reference library
//! applies to such records (its "attic": `otf2_attic.c`), so an old archive's regions and
//! communicators read as otf2-print shows them. Event records of OTF2 1.x that later versions
//! replaced (the OpenMP fork, join, lock and task records) are decoded in `events`.

use crate::reading::otf2::group_types::{
    GROUP_COMM_GROUP, GROUP_COMM_LOCATIONS, GROUP_COMM_SELF, GROUP_LOCATIONS, GROUP_REGIONS,
};

const PARADIGM_UNKNOWN: u8 = 0;
const PARADIGM_USER: u8 = 1;
const PARADIGM_OPENMP: u8 = 3;
const PARADIGM_MPI: u8 = 4;

/// The role and paradigm of an OTF2 1.0 region type. Types several adapters used (function,
/// user region) have no paradigm, as in the reference library.
pub fn region_role_and_paradigm(region_type: u8) -> (u8, u8) {
    // Roles, as OTF2 numbers them.
    const FUNCTION: u8 = 1;
    const WRAPPER: u8 = 2;
    const LOOP: u8 = 3;
    const CODE: u8 = 4;
    match region_type {
        1 | 3 => (FUNCTION, PARADIGM_UNKNOWN),
        2 => (LOOP, PARADIGM_USER),
        4 => (27, PARADIGM_USER),  // file I/O
        5 => (5, PARADIGM_OPENMP), // parallel
        6 => (LOOP, PARADIGM_OPENMP),
        7 => (6, PARADIGM_OPENMP),   // sections
        8 => (7, PARADIGM_OPENMP),   // section
        9 => (8, PARADIGM_OPENMP),   // workshare
        10 => (9, PARADIGM_OPENMP),  // single
        11 => (11, PARADIGM_OPENMP), // master
        12 => (12, PARADIGM_OPENMP), // critical
        13 => (14, PARADIGM_OPENMP), // atomic
        14 => (15, PARADIGM_OPENMP), // barrier
        15 => (16, PARADIGM_OPENMP), // implicit barrier
        16 => (17, PARADIGM_OPENMP), // flush
        17 => (13, PARADIGM_OPENMP), // critical structured block
        18 => (10, PARADIGM_OPENMP), // single structured block
        19 => (WRAPPER, PARADIGM_OPENMP),
        20 => (20, PARADIGM_OPENMP),      // task
        21 => (22, PARADIGM_OPENMP),      // task wait
        22 => (15, PARADIGM_MPI),         // barrier
        23 => (23, PARADIGM_MPI),         // one to all
        24 => (24, PARADIGM_MPI),         // all to one
        25 => (25, PARADIGM_MPI),         // all to all
        26 => (26, PARADIGM_MPI),         // other collective
        27..=29 => (CODE, PARADIGM_USER), // phase, dynamic, dynamic phase
        30 | 32 => (LOOP, PARADIGM_USER), // dynamic loop (phase)
        31 => (FUNCTION, PARADIGM_USER),  // dynamic function
        33 => (21, PARADIGM_OPENMP),      // task create
        34 => (18, PARADIGM_OPENMP),      // ordered
        35 => (19, PARADIGM_OPENMP),      // ordered structured block
        _ => (0, PARADIGM_UNKNOWN),
    }
}

/// The type and paradigm of a group type written before OTF2 1.2: 1 locations, 2 regions,
/// 3 metric (a group of regions, as the reference library reads it), 4 an MPI group, 5 MPI's
/// COMM_SELF, 6 the MPI locations (the world's members, by location).
pub fn group_type_before_1_2(old: u8) -> (u8, u8) {
    match old {
        1 => (GROUP_LOCATIONS, PARADIGM_UNKNOWN),
        2 | 3 => (GROUP_REGIONS, PARADIGM_UNKNOWN),
        4 => (GROUP_COMM_GROUP, PARADIGM_MPI),
        5 => (GROUP_COMM_SELF, PARADIGM_MPI),
        6 => (GROUP_COMM_LOCATIONS, PARADIGM_MPI),
        _ => (0, PARADIGM_UNKNOWN),
    }
}

/// The OTF2 1.0 region type of a role and paradigm, for writing such archives: the first type
/// that reads back as them, else a function (role function) or unknown.
pub fn region_type_of(role: u8, paradigm: u8) -> u8 {
    (1..=35).find(|&t| region_role_and_paradigm(t) == (role, paradigm)).unwrap_or(if role == 1 { 1 } else { 0 })
}

/// The group type before OTF2 1.2 of an MPI group of type `kind` (locations, group, self).
pub fn group_type_of_mpi(kind: u8) -> u8 {
    match kind {
        GROUP_COMM_LOCATIONS => 6,
        GROUP_COMM_GROUP => 4,
        GROUP_COMM_SELF => 5,
        GROUP_LOCATIONS => 1,
        GROUP_REGIONS => 2,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_region_types_become_roles_and_paradigms() {
        assert_eq!(region_role_and_paradigm(5), (5, PARADIGM_OPENMP), "an OpenMP parallel region");
        assert_eq!(region_role_and_paradigm(15), (16, PARADIGM_OPENMP), "an implicit barrier");
        assert_eq!(region_role_and_paradigm(22), (15, PARADIGM_MPI), "MPI_Barrier");
        assert_eq!(region_role_and_paradigm(1), (1, PARADIGM_UNKNOWN));
        assert_eq!(region_role_and_paradigm(200), (0, PARADIGM_UNKNOWN));
    }

    #[test]
    fn old_group_types_say_mpi_in_the_paradigm() {
        assert_eq!(group_type_before_1_2(6), (GROUP_COMM_LOCATIONS, PARADIGM_MPI));
        assert_eq!(group_type_before_1_2(4), (GROUP_COMM_GROUP, PARADIGM_MPI));
        assert_eq!(group_type_before_1_2(5), (GROUP_COMM_SELF, PARADIGM_MPI));
        assert_eq!(group_type_before_1_2(3), (GROUP_REGIONS, PARADIGM_UNKNOWN));
        for kind in [GROUP_COMM_LOCATIONS, GROUP_COMM_GROUP, GROUP_COMM_SELF] {
            assert_eq!(group_type_before_1_2(group_type_of_mpi(kind)), (kind, PARADIGM_MPI));
        }
    }

    #[test]
    fn every_old_region_type_is_written_back_as_itself_or_its_equal() {
        for t in 0..=35 {
            let (role, paradigm) = region_role_and_paradigm(t);
            assert_eq!(region_role_and_paradigm(region_type_of(role, paradigm)), (role, paradigm), "type {t}");
        }
    }
}
