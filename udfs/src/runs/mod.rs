//! A run as a sequence of iterations, and runs side by side: the iterations of the main loop
//! found from the calls (`iterations`, its regions and its per-iteration profile), and two or
//! more runs compared by region, rank, node, pair, message size or iteration, or as a scaling
//! series (`compare`).

pub mod compare;
pub mod iterations;
