//! commdb's behaviour tests that run in one process: each module is a concern (a reader, an
//! analysis against its oracle, the docs' examples, the fuzzers), compiled and linked once as one
//! test binary rather than one each. The SQL suites (`slt`) and the interrupt, whose flag is the
//! process's, are test binaries of their own.

mod analysis_budget;
mod casita_oracle;
mod chrome_export;
mod clock_ground_truth;
mod compare_noise;
mod declarations;
mod docs;
mod first_use;
mod fuzz_inputs;
mod fuzz_sql;
mod gpu_generated;
mod hostlist_samples;
mod iterations_truth;
mod lod_determinism;
mod nsys_exports;
mod otf2_reference;
mod paraver_applications;
mod paraver_threads;
mod part_kinds;
mod rank_order;
mod recipe;
mod remembered;
mod scalasca_oracle;
mod store_checks;
mod streamed_convert;
