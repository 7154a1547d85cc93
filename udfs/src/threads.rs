//! Threads as tables: the OpenMP (and other threading models') records of the `events` table
//! paired into the instances an analyst asks about. `parallel_regions` gives one row per
//! thread of each fork/join instance: the fork and join on the thread that forked, and each
//! member's ThreadTeamBegin/End; `lock_acquisitions` one row per acquisition of a lock, from
//! ThreadAcquireLock to ThreadReleaseLock; `thread_tasks` one row per task, from its
//! ThreadTaskCreate through the ThreadTaskSwitch records that run it to its ThreadTaskComplete.
//! The records are those OTF2 defines (OTF2 1.x's OmpFork, OmpJoin, OmpAcquireLock,
//! OmpReleaseLock and OmpTask* read as the same kinds; its tasks are named by id).
//!
//! Pairing: on one thread, a fork and its join (a team's begin and end, a lock's acquisition
//! and release) nest, so each opening record pairs with the closing record that brings its
//! nesting level back down (the k-th opening at level d with the k-th closing to level d - 1).
//! A fork's team is the team whose begin follows it on the forking thread. The members of an
//! instance are found by team and order: OpenMP's team members each begin every instance of
//! their team, so a member's k-th begin of team T belongs to the rank's k-th fork of team T.
//! An opening record left unclosed keeps NULL times, as does an instance whose team no member
//! began (OTF2 1.x writes no team records: its instances have the forking thread only).
//! The functions are views, queries over the events.

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::error::Result;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, int64};
use commdb_analysis::params::{Param, ParamDefault, Type, param};
use commdb_analysis::relation::Relation;

/// The events to read.
pub const EVENTS: Param = param("rel", Type::Relation, ParamDefault::Text("events"), "the events to read");

pub const PARALLEL_REGIONS: Function = Function {
    name: "parallel_regions",
    params: &[EVENTS],
    output: Output::Columns(&[
        col("rank", int64, "the rank"),
        col("instance", int64, "the fork/join instance: 0-based in fork order within the rank"),
        col("team", int64, "the thread team (its communicator id; NULL: no team record followed the fork)"),
        col("master_thread", int64, "the thread that forked and joined"),
        col("thread", int64, "a member of the team (the forking thread when no member began it)"),
        col("requested_threads", int64, "threads the fork asked for"),
        col("team_size", int64, "members that began the team"),
        col("fork_ts", int64, "the fork, on the master thread"),
        col("join_ts", int64, "the join, on the master thread (NULL: never joined)"),
        col("begin_ts", int64, "this member's team begin (NULL: it recorded none)"),
        col("end_ts", int64, "this member's team end"),
        col("before_ns", int64, "from the fork to this member's team begin: starting the team"),
        col("after_ns", int64, "from this member's team end to the join: the master's join after the member left"),
    ]),
    description: "one row per thread of each OpenMP fork/join instance (parallel region): its rank, instance, team, forking thread, members with their team begin and end, the fork and the join, and the time from the fork to each member's begin and from its end to the join",
    make: Make::Table(parallel_regions),
};

pub const LOCK_ACQUISITIONS: Function = Function {
    name: "lock_acquisitions",
    params: &[EVENTS],
    output: Output::Columns(&[
        col("rank", int64, "the rank"),
        col("thread", int64, "the thread that took the lock"),
        col("lock", int64, "the lock's id"),
        col("acquisition_order", int64, "the acquisition's order among all acquisitions of the lock"),
        col("acquire_ts", int64, "when the thread acquired it"),
        col("release_ts", int64, "when it released it (NULL: never released)"),
        col("held_ns", int64, "release_ts - acquire_ts"),
    ]),
    description: "one row per acquisition of a lock (OpenMP critical sections and the lock API, Pthreads mutexes): rank, thread, lock, acquisition order, when it was taken and released, and how long it was held",
    make: Make::Table(lock_acquisitions),
};

pub const THREAD_TASKS: Function = Function {
    name: "thread_tasks",
    params: &[EVENTS],
    output: Output::Columns(&[
        col("rank", int64, "the rank"),
        col("team", int64, "the thread team (NULL: OTF2 1.x, whose tasks are named by id alone)"),
        col("creating_thread", int64, "the thread that created it (its number in the team, as recorded)"),
        col("generation", int64, "its generation number on the creating thread"),
        col("task_id", int64, "its id (OTF2 1.x)"),
        col("created_ts", int64, "when it was created (NULL: an implicit task, switched to but never created)"),
        col("started_ts", int64, "when a thread first switched to it"),
        col("executing_thread", int64, "the thread that first ran it"),
        col("switches", int64, "times a thread switched to it (more than 1: it was suspended and resumed)"),
        col("completed_ts", int64, "when it completed (NULL: never)"),
        col("completing_thread", int64, "the thread that completed it"),
        col("queued_ns", int64, "started_ts - created_ts: from its creation until a thread took it"),
        col("span_ns", int64, "completed_ts - started_ts: from its start to its completion, suspensions included"),
    ]),
    description: "one row per task (OpenMP tasks): who created it and when, which thread first ran it and when, how often it was resumed, when and where it completed, how long it waited to start and how long it took",
    make: Make::Table(thread_tasks),
};

arguments! {
    struct ThreadArgs(PARALLEL_REGIONS, LOCK_ACQUISITIONS, THREAD_TASKS) {
        rel: Relation,
    }
}

/// The view of `query` over the events relation of the call, which must have `columns`.
/// Its rows come in order of `keys`, the query's ORDER BY.
fn events_view(a: &Args, columns: &[&str], query: fn(&str) -> String, keys: &[&str]) -> Result<Arc<dyn TableProvider>> {
    let ThreadArgs { rel } = ThreadArgs::read(a)?;
    rel.columns(a.function, columns)?;
    let view = commdb_analysis::views::sql_view(a.session, a.function, query(&rel.reference.to_quoted_string()))?;
    Ok(Arc::new(commdb_analysis::ordered::OrderedView::new(view, keys)))
}

fn parallel_regions(a: &Args) -> Result<Arc<dyn TableProvider>> {
    events_view(
        a,
        &["rank", "thread", "seq", "ts", "kind", "comm", "tag"],
        regions_query,
        &["rank", "instance", "thread"],
    )
}

fn lock_acquisitions(a: &Args) -> Result<Arc<dyn TableProvider>> {
    events_view(
        a,
        &["rank", "thread", "seq", "ts", "kind", "request", "tag"],
        locks_query,
        &["rank", "acquire_ts", "thread"],
    )
}

fn thread_tasks(a: &Args) -> Result<Arc<dyn TableProvider>> {
    events_view(
        a,
        &["rank", "thread", "ts", "kind", "comm", "peer", "tag", "request"],
        tasks_query,
        &["rank", "created_ts", "team", "creating_thread", "generation", "task_id"],
    )
}

/// The query of `thread_tasks` over the events of relation `e`: a task is its team, creating
/// thread and generation number (OTF2 1.x: its id), its records grouped by that key.
fn tasks_query(e: &str) -> String {
    format!(
        "WITH t AS (
  SELECT CAST(rank AS BIGINT) AS rank, CAST(thread AS BIGINT) AS thread, ts, CAST(kind AS VARCHAR) AS kind,
         CAST(comm AS BIGINT) AS team, CAST(peer AS BIGINT) AS creator, CAST(tag AS BIGINT) AS generation,
         CAST(request AS BIGINT) AS task_id
  FROM {e} WHERE kind IN ('thread_task_create', 'thread_task_switch', 'thread_task_complete')),
tasks AS (
  SELECT rank, team, creator, generation, task_id,
         min(ts) FILTER (WHERE kind = 'thread_task_create') AS created_ts,
         first_value(thread ORDER BY ts) FILTER (WHERE kind = 'thread_task_create') AS created_by,
         min(ts) FILTER (WHERE kind = 'thread_task_switch') AS started_ts,
         first_value(thread ORDER BY ts) FILTER (WHERE kind = 'thread_task_switch') AS executing_thread,
         count(*) FILTER (WHERE kind = 'thread_task_switch') AS switches,
         max(ts) FILTER (WHERE kind = 'thread_task_complete') AS completed_ts,
         first_value(thread ORDER BY ts DESC) FILTER (WHERE kind = 'thread_task_complete') AS completing_thread
  FROM t GROUP BY rank, team, creator, generation, task_id)
SELECT rank, team, coalesce(creator, created_by) AS creating_thread, generation, task_id, created_ts, started_ts,
       executing_thread, switches, completed_ts, completing_thread,
       started_ts - created_ts AS queued_ns, completed_ts - started_ts AS span_ns
FROM tasks ORDER BY rank, created_ts, team, creating_thread, generation, task_id"
    )
}

/// The query of `parallel_regions` over the events of relation `e` (quoted as SQL names it).
fn regions_query(e: &str) -> String {
    format!(
        "WITH t AS (
  SELECT CAST(rank AS BIGINT) AS rank, CAST(thread AS BIGINT) AS thread, seq, ts, CAST(kind AS VARCHAR) AS kind,
         CAST(comm AS BIGINT) AS comm, CAST(tag AS BIGINT) AS tag
  FROM {e} WHERE kind IN ('thread_fork', 'thread_join', 'thread_team_begin', 'thread_team_end')),
s AS (
  SELECT *,
    sum(CASE kind WHEN 'thread_fork' THEN 1 WHEN 'thread_join' THEN -1 ELSE 0 END)
      OVER (PARTITION BY rank, thread ORDER BY seq ROWS UNBOUNDED PRECEDING) AS forks_open,
    sum(CASE kind WHEN 'thread_team_begin' THEN 1 WHEN 'thread_team_end' THEN -1 ELSE 0 END)
      OVER (PARTITION BY rank, thread ORDER BY seq ROWS UNBOUNDED PRECEDING) AS teams_open,
    lead(kind) OVER (PARTITION BY rank, thread ORDER BY seq) AS next_kind,
    lead(comm) OVER (PARTITION BY rank, thread ORDER BY seq) AS next_comm
  FROM t),
forks AS (
  SELECT rank, thread, seq, ts, tag, forks_open AS level,
         CASE WHEN next_kind = 'thread_team_begin' THEN next_comm END AS team,
         row_number() OVER (PARTITION BY rank, thread, forks_open ORDER BY seq) AS k
  FROM s WHERE kind = 'thread_fork'),
joins AS (
  SELECT rank, thread, ts, forks_open + 1 AS level,
         row_number() OVER (PARTITION BY rank, thread, forks_open ORDER BY seq) AS k
  FROM s WHERE kind = 'thread_join'),
instances AS (
  SELECT f.rank, f.thread AS master_thread, f.team, f.tag AS requested_threads, f.ts AS fork_ts, j.ts AS join_ts,
         CAST(row_number() OVER (PARTITION BY f.rank ORDER BY f.ts, f.thread, f.seq) - 1 AS BIGINT) AS instance,
         row_number() OVER (PARTITION BY f.rank, f.team ORDER BY f.ts, f.thread, f.seq) AS nth
  FROM forks f LEFT JOIN joins j ON j.rank = f.rank AND j.thread = f.thread AND j.level = f.level AND j.k = f.k),
begins AS (
  SELECT rank, thread, seq, ts, comm AS team, teams_open AS level,
         row_number() OVER (PARTITION BY rank, thread, teams_open ORDER BY seq) AS k
  FROM s WHERE kind = 'thread_team_begin'),
ends AS (
  SELECT rank, thread, ts, teams_open + 1 AS level,
         row_number() OVER (PARTITION BY rank, thread, teams_open ORDER BY seq) AS k
  FROM s WHERE kind = 'thread_team_end'),
members AS (
  SELECT b.rank, b.thread, b.team, b.ts AS begin_ts, x.ts AS end_ts,
         row_number() OVER (PARTITION BY b.rank, b.thread, b.team ORDER BY b.seq) AS nth
  FROM begins b LEFT JOIN ends x ON x.rank = b.rank AND x.thread = b.thread AND x.level = b.level AND x.k = b.k),
rows AS (
  SELECT i.rank, i.instance, i.team, i.master_thread, coalesce(m.thread, i.master_thread) AS thread,
         i.requested_threads, count(m.thread) OVER (PARTITION BY i.rank, i.instance) AS team_size,
         i.fork_ts, i.join_ts, m.begin_ts, m.end_ts
  FROM instances i LEFT JOIN members m ON m.rank = i.rank AND m.team = i.team AND m.nth = i.nth)
SELECT rank, instance, team, master_thread, thread, requested_threads, team_size, fork_ts, join_ts, begin_ts, end_ts,
       begin_ts - fork_ts AS before_ns, join_ts - end_ts AS after_ns
FROM rows ORDER BY rank, instance, thread"
    )
}

/// The query of `lock_acquisitions` over the events of relation `e`.
fn locks_query(e: &str) -> String {
    format!(
        "WITH t AS (
  SELECT CAST(rank AS BIGINT) AS rank, CAST(thread AS BIGINT) AS thread, seq, ts, CAST(kind AS VARCHAR) AS kind,
         CAST(request AS BIGINT) AS lock, CAST(tag AS BIGINT) AS acquisition_order,
         sum(CASE WHEN kind = 'thread_acquire_lock' THEN 1 ELSE -1 END)
           OVER (PARTITION BY rank, thread, request ORDER BY seq ROWS UNBOUNDED PRECEDING) AS held
  FROM {e} WHERE kind IN ('thread_acquire_lock', 'thread_release_lock') AND request IS NOT NULL),
acquired AS (
  SELECT *, row_number() OVER (PARTITION BY rank, thread, lock, held ORDER BY seq) AS k
  FROM t WHERE kind = 'thread_acquire_lock'),
released AS (
  SELECT rank, thread, lock, ts, held + 1 AS level,
         row_number() OVER (PARTITION BY rank, thread, lock, held ORDER BY seq) AS k
  FROM t WHERE kind = 'thread_release_lock')
SELECT a.rank, a.thread, a.lock, a.acquisition_order, a.ts AS acquire_ts, r.ts AS release_ts,
       r.ts - a.ts AS held_ns
FROM acquired a LEFT JOIN released r
  ON r.rank = a.rank AND r.thread = a.thread AND r.lock = a.lock AND r.level = a.held AND r.k = a.k
ORDER BY rank, acquire_ts, thread"
    )
}
