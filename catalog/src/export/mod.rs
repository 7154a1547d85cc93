//! Writing a trace for other tools to open. `chrome`: Chrome trace-event JSON for Perfetto's
//! UI and chrome://tracing. (The OTF2 and Paraver writers, which produce the formats commdb
//! also reads, live beside their readers in crate::reading.)

pub mod chrome;
pub mod streams;
