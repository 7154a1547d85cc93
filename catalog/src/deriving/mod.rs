//! Derivation of the analysis tables from raw events: `calls` from enter/leave nesting,
//! `messages` by MPI's matching rules, `collectives` by per-communicator sequence. One walk
//! per (rank, thread) stream, in parallel with rayon, collects what all three need (`walk`);
//! messages are then matched and collective parts ordered across streams. Problems
//! (unmatched halves, unbalanced enter/leave) are counted as warnings.

pub mod assemble;
pub mod calls;
pub mod collectives;
pub mod event_columns;
pub mod messages;
pub mod steps;
pub mod time_order;
pub mod walk;

use arrow::array::RecordBatch;

use crate::error::Result;
use crate::events::{EventColumns, PartStream};
use crate::phases::LoadPhases;
use crate::trace::{CommInfo, NodeMap, Warnings};

/// The derived tables of a trace.
#[derive(Debug)]
pub struct Derived {
    pub calls: calls::CallParts,
    pub messages: messages::Messages,
    /// The `collectives` table.
    pub collectives: RecordBatch,
    /// Earliest and latest event time, (0, 0) without events.
    pub span: (i64, i64),
    /// Time of each phase of the derivation.
    pub phases: LoadPhases,
}

/// Derive calls, messages and collectives (`streams` is `events.streams()`). `keep_matched`
/// also lists the event pair of every matched message (`Messages::matched_events`). The
/// problems found are added to `warnings` only when the derivation completes: one that is
/// interrupted finds them again when it runs again.
pub fn derive(
    events: &[EventColumns<'_>],
    streams: &[PartStream],
    nodes: &NodeMap,
    comms: &[CommInfo],
    keep_matched: bool,
    warnings: &mut Warnings,
) -> Result<Derived> {
    let mut phases = LoadPhases::default();
    // Interrupted, the derivation stops within its walk and between its phases
    // (crate::interrupt).
    crate::interrupt::check("deriving calls, messages and collectives")?;
    let mut found = Warnings::default();
    let walked = phases.time("stream walk", || walk::walk(events, streams, &mut found))?;
    // The collectives table is made on one thread: it runs beside the matching, which stops
    // between its phases when interrupted (on a thread of rayon's, as work of this statement).
    let statement = crate::interrupt::current();
    let mut collective_warnings = Warnings::default();
    let ((messages, message_phases), (collectives, collective_seconds)) = rayon::join(
        || {
            let mut phases = LoadPhases::default();
            let messages = crate::interrupt::within(statement, || {
                messages::derive(walked.halves, streams, nodes, keep_matched, &mut found, &mut phases)
            });
            (messages, phases)
        },
        || {
            let start = std::time::Instant::now();
            let batch = collectives::assemble(walked.collective_parts, comms, &mut collective_warnings).to_batch();
            (batch, start.elapsed().as_secs_f64())
        },
    );
    let (messages, collectives) = (messages?, collectives?);
    found.merge(collective_warnings);
    warnings.merge(found);
    phases.extend(message_phases);
    phases.beside("collectives", collective_seconds);
    Ok(Derived { calls: walked.calls, messages, collectives, span: walked.span, phases })
}

/// `slice` cut into consecutive pieces of the given lengths (which must not add up to more
/// than its length), so that parallel workers can each fill their own piece.
pub(crate) fn split_lengths<T>(slice: &mut [T], lengths: impl IntoIterator<Item = usize>) -> Vec<&mut [T]> {
    let mut rest = slice;
    lengths
        .into_iter()
        .map(|n| {
            let (piece, tail) = std::mem::take(&mut rest).split_at_mut(n);
            rest = tail;
            piece
        })
        .collect()
}
