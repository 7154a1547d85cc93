//! The replay on a distributed engine, planned as steps ([`commdb_analysis::steps`]) so that no
//! task reads the calls or the messages whole (docs/scale.md, "The replay"):
//!
//! 1. **Each message to its sender's part**, a task per part of the messages: its four sides'
//!    instants as the replay places them, keyed by its sender.
//! 2. **The sends placed**, a task per part of the calls with the messages of its ranks
//!    ([`super::placing`]): each send's post and completion found in its rank's MPI calls;
//!    the message goes on keyed by its receiver.
//! 3. **The receives and collective members placed**, a task per part of the calls with the
//!    messages and members of its ranks: each gives what its calls wait for and post, each
//!    call by its rank and its number there, and the sides left out are counted per rank;
//!    each of its ranks' MPI calls go on as rows of bytes ([`super::rank_calls`]).
//! 4. **The replay**, in one task, over the ranks' MPI calls and what each call waits for:
//!    the same lists, the same visit in dependency order and the same answer as in one
//!    process ([`super::sweep`], [`super::simulate`]). The replay is one chain along the
//!    messages across the ranks: a call starts when the calls that post what it waits for
//!    have, on any rank, so it is not split among tasks (docs/scale.md says what a split into
//!    supersteps would take). It reads about 4 bytes an MPI call and a row per message and
//!    member, where the inputs give a row per call of any region and 7 columns a message.
//!    Its answer does not depend on the order those rows come in (each rank's calls go into
//!    the store when its last row has come, the items name their calls by rank and number,
//!    and the answer is given in rank order, in integers), so on a distributed engine it
//!    reads them through one exchange rather than a shuffle read per part held whole
//!    (`Reads::OnceAnyOrder`).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::compute::is_not_null;
use datafusion::error::Result;

use super::placing::{self, Sides};
use commdb_analysis::columns::int64_column;
use commdb_analysis::plan::{Main, Work};
use commdb_analysis::steps::{From, Reads, Step};
use commdb_analysis::stream::{Mapper, Prepare, StartFold};

/// The steps of the replay over its inputs (calls, messages, collectives), the last giving
/// the answer by `answer` (the folder of [`super::sweep`] over placed items).
pub(super) fn steps(what: &'static str, answer: StartFold, schema: arrow::datatypes::SchemaRef) -> Vec<Step> {
    let to_sender: Prepare = Arc::new(|_| Ok(Box::new(ToSender) as Box<dyn Mapper>));
    let sends: StartFold = Arc::new(move || placing::start(what, Sides::Sends));
    let receives: StartFold = Arc::new(move || placing::start(what, Sides::Receives));
    vec![
        Step {
            label: "each message, to its sender's part",
            schema: placing::to_sender(),
            work: Work::Streamed(to_sender),
            inputs: vec![From::Input(1)],
            reads: Reads::ByPart,
        },
        Step {
            label: "the sends placed in their calls, to their receivers' parts",
            schema: placing::at_receiver(),
            work: Work::Folded(sends, Main::ByRank(0)),
            inputs: vec![From::Input(0), From::Step(0)],
            reads: Reads::Routed(vec![1]),
        },
        Step {
            label: "the receives and collective members placed in their calls, and each rank's MPI calls",
            schema: placing::items(),
            work: Work::Folded(receives, Main::ByRank(0)),
            inputs: vec![From::Input(0), From::Step(1), From::Input(2)],
            reads: Reads::Routed(vec![1, 2]),
        },
        Step {
            label: "the replay over every rank's MPI calls and what each waits for",
            schema,
            work: Work::Folded(answer, Main::Batches),
            inputs: vec![From::Step(2)],
            reads: Reads::OnceAnyOrder,
        },
    ]
}

/// Each message (src, dst, bytes, send_call_start, send_complete_ts, recv_post_ts,
/// recv_call_start) as a row of [`placing::to_sender`]: keyed by its sender (its receiver
/// when it has none; a message with neither is placed nowhere and counted nowhere, as in one
/// process), its sides' instants as the replay places them.
struct ToSender;

impl Mapper for ToSender {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let one = std::slice::from_ref(batch);
        let [src, dst, bytes, send_call_start, send_complete, recv_post, recv_call_start] =
            [0, 1, 2, 3, 4, 5, 6].map(|i| int64_column(one, i));
        let (src, dst, send_call_start, recv_call_start) = (src?, dst?, send_call_start?, recv_call_start?);
        let either = |a: &Int64Array, b: &Int64Array| -> Result<ArrayRef> {
            Ok(arrow::compute::kernels::zip::zip(&is_not_null(a)?, a, b)?)
        };
        let rank = either(&src, &dst)?;
        let columns: Vec<ArrayRef> = vec![
            rank.clone(),
            Arc::new(src),
            Arc::new(send_call_start.clone()),
            either(&send_complete?, &send_call_start)?,
            Arc::new(dst),
            either(&recv_post?, &recv_call_start)?,
            Arc::new(recv_call_start),
            Arc::new(bytes?),
        ];
        // The schema's rank is not NULL: rows without either rank are left out first.
        let keep = is_not_null(&rank)?;
        let columns =
            columns.iter().map(|c| arrow::compute::filter(c, &keep)).collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(placing::to_sender(), columns)?)
    }
}
