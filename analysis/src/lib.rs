//! commdb-analysis: how commdb's SQL functions are declared, called, planned and run. An
//! analysis author writes a declaration (`declare`: name, parameters, output columns, one
//! paragraph of meaning), reads the call's arguments into a struct (`args`, the `arguments!`
//! macro) and says how the answer is computed from the relations it reads (`derived`: whole,
//! streamed, swept a rank at a time, or folded); this crate does the rest:
//! - **calls**: a call in a FROM clause is planned by `function_calls` (named arguments, a
//!   relation given as a name, a CTE or a query), its relations resolved by `relation`;
//! - **plan and run**: `derived` is the analysis a call planned, `node` the call as a node of
//!   the logical plan (`AnalysisCall`, its inputs as child plans), `plan` its physical node
//!   (`AnalysisExec`), which runs the work as `stream` and `by_rank` say, under the memory
//!   `budget`, its main input read by a task of its own (`read_ahead`);
//! - **cluster**: `recipe` plans a call again on another process from what it looked up,
//!   `steps` and `routes` plan an analysis as steps and send rows to the task of their rank,
//!   `once` ends a stage after a node of one task;
//! - **views**: `views` plans an analysis that is SQL over others;
//! - **per session**: `remembered` keeps what analyses learnt from a trace's tables;
//! - **sharing and order**: `shared` computes an analysis a view reads several times once,
//!   `ordered` keeps a view's rows in its key's order;
//! - helpers for the work itself: `columns` (an input's columns as arrays), `shown`
//!   (quantities as people read them), `params` (parameter types and defaults).
//!
//! The analyses themselves are in commdb-udfs, in folders by family.

pub mod args;
pub mod budget;
pub mod by_rank;
pub mod columns;
pub mod declare;
pub mod derived;
pub mod function_calls;
pub mod merged;
pub mod node;
pub mod once;
pub mod ordered;
pub mod params;
pub mod plan;
pub mod plans;
pub mod read_ahead;
pub mod recipe;
pub mod relation;
pub mod remembered;
pub mod routes;
pub mod shared;
pub mod shown;
pub mod steps;
pub mod stream;
pub mod views;
