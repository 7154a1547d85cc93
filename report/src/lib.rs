//! What commdb draws, shared by the shell and the Python package: the one-page HTML report of
//! a trace (`page`), an SVG chart of any query's result (`chart`) and a Graphviz DOT graph of
//! an edge list (`dot`). Each takes query results or a session and returns text; writing it
//! to a file or showing it is the caller's.

pub mod chart;
pub mod dot;
mod page;

pub use page::diff::html as diff_html;
pub use page::{Written, html};
