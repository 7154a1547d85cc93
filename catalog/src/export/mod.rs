//! Writing a trace for other tools to open, one module per format: `chrome` (Chrome
//! trace-event JSON for Perfetto's UI and chrome://tracing, with `streams` for accelerator
//! streams), `otf2` (an OTF2 archive as Score-P writes it, for otf2-print, Scalasca, Vampir and
//! CASITA) and `paraver` (a Paraver trace as Extrae writes it, for Paraver and Dimemas). The OTF2
//! and Paraver writers write the formats commdb also reads, with the constants of their readers
//! (crate's `reading`).

pub mod chrome;
pub mod otf2;
pub mod paraver;
pub mod streams;
