//! OTF2 load benchmark: reads an archive with commdb's reader into the `events` table, then
//! again with all derived tables (calls, messages, collectives), and prints events/s and peak
//! memory (VmHWM), ROUNDS times (default 1), and the best round of each. When the archive does not exist yet it is generated first (a 1024-rank
//! stencil, 32 ranks per node, ITERATIONS iterations) with commdb's OTF2 writer.
//! `tests/otf2/bench.sh` runs it next to the reference library's reader.
//! `cargo bench -p commdb-shell --bench otf2 -- ARCHIVE_DIR [ITERATIONS] [ROUNDS]`
//!
//! The build of the best round with derived tables is broken down by phase (stream walk,
//! message matching, msg_id order, gather, collectives beside them, conversion to Arrow).
//!
//! At the end it measures the machine's memory bandwidth and sets each load against the time
//! that writing its tables takes at that speed (and, for the derivation, reading the time,
//! kind and region of every event): a floor that no reader or derivation can go below, which
//! shows how close to the hardware each of them runs.

mod common;
use common::{cpu_seconds, peak_rss_mib};

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use arrow::array::{ArrayData, RecordBatch};
use arrow::buffer::Buffer;
use rayon::prelude::*;

use commdb_catalog::generate::{GeneratorConfig, generate};

/// Large tables are built and dropped in quick succession; mimalloc reuses the memory instead of
/// returning it to the kernel and faulting it in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: otf2 ARCHIVE_DIR [ITERATIONS] [ROUNDS]");
        std::process::exit(2);
    };
    let dir = Path::new(dir);
    let anchor = dir.join("traces.otf2");
    let path = anchor.as_path();
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1).max(1);
    println!("commdb OTF2 load benchmark, {} threads, {rounds} rounds", rayon::current_num_threads());
    println!("{}", common::allocator_mode());
    if !anchor.exists() {
        let iterations = args.get(1).and_then(|i| i.parse().ok()).unwrap_or(1250);
        let cfg = GeneratorConfig { ranks: 1024, ranks_per_node: 32, iterations, ..GeneratorConfig::default() };
        let t = Instant::now();
        let g = generate(&cfg).expect("generate");
        let gen_s = t.elapsed().as_secs_f64();
        let n = g.truth.events;
        println!(
            "generate                  {n:>12} events {gen_s:>8.3} s {:>8.2} M events/s  peak {:>7.0} MiB",
            n as f64 / gen_s / 1e6,
            peak_rss_mib()
        );
        let t = Instant::now();
        commdb_catalog::export::otf2::write(&g.trace, dir).expect("write");
        let w = t.elapsed().as_secs_f64();
        println!("write OTF2                {n:>12} events {w:>8.3} s {:>8.2} M events/s", n as f64 / w / 1e6);
    }

    // Each round loads the `events` table alone, then every table; the best round of each is
    // compared. Only rounds after the first reuse pages (see `allocator_mode`).
    let (mut best_events, mut best_all) = (f64::INFINITY, f64::INFINITY);
    let mut best_phases = commdb_catalog::phases::LoadPhases::default();
    let (mut events_bytes, mut derived_bytes, mut n_events) = (0, 0, 0);
    for round in 0..rounds {
        let ((n, events), load, busy) = timed(|| {
            let raw = commdb_catalog::reading::otf2::read(path).expect("read");
            let names: Vec<String> = raw.regions.iter().map(|r| r.name.clone()).collect();
            (raw.events.len(), raw.events.into_batches(&names).expect("events table"))
        });
        let table_bytes = bytes_of(&events);
        (events_bytes, n_events) = (table_bytes, n);
        best_events = best_events.min(load);
        println!(
            "round {round} load to events table      {n:>12} events {load:>8.3} s {:>8.2} M events/s  {busy:.2} cores busy  table {:>6.0} MiB ({:.1} bytes an event)  peak {:>7.0} MiB",
            n as f64 / load / 1e6,
            table_bytes as f64 / 1048576.0,
            table_bytes as f64 / n.max(1) as f64,
            peak_rss_mib()
        );
        drop(events);

        let (trace, all, busy) = timed(|| {
            let trace = commdb_catalog::reading::otf2::read(path).expect("read").build().expect("build");
            trace.build_all().expect("every table");
            trace
        });
        if all < best_all {
            best_phases = trace.phases();
        }
        best_all = best_all.min(all);
        derived_bytes =
            ["calls", "messages", "collectives"].iter().map(|t| bytes_of(&trace.table(t).expect("built"))).sum();
        println!(
            "round {round} load with derived tables  {n:>12} events {all:>8.3} s {:>8.2} M events/s  {busy:.2} cores busy  {} calls, {} messages, {} collective parts  peak {:>7.0} MiB",
            n as f64 / all / 1e6,
            trace.row_count("calls").expect("built"),
            trace.row_count("messages").expect("built"),
            trace.row_count("collectives").expect("built"),
            peak_rss_mib()
        );
        if round + 1 == rounds {
            println!(
                "best: events table {best_events:.3} s ({:.2} M events/s), with derived tables {best_all:.3} s ({:+.0}%)",
                n as f64 / best_events / 1e6,
                (best_all / best_events - 1.0) * 100.0
            );
        }
    }
    println!("phases of the best round with derived tables: {best_phases}");
    floor_report(best_events, best_all, events_bytes, derived_bytes, n_events);
}

/// Run `load`: what it returns, its wall-clock seconds and how many cores it kept busy.
fn timed<T>(load: impl FnOnce() -> T) -> (T, f64, f64) {
    let (t, cpu) = (Instant::now(), cpu_seconds());
    let out = load();
    let wall = t.elapsed().as_secs_f64();
    (out, wall, (cpu_seconds() - cpu) / wall)
}

/// The memory a table's buffers hold, each allocation counted once: the `events` table's
/// `ts_local` is `ts`'s buffer when the clocks were not corrected, and its all-null columns
/// share buffers of their sentinel (`get_array_memory_size` counts a shared buffer in every
/// array).
fn bytes_of(batches: &[RecordBatch]) -> usize {
    fn add(data: &ArrayData, seen: &mut HashSet<usize>) -> usize {
        let mut once = |b: &Buffer| if seen.insert(b.as_ptr() as usize - b.ptr_offset()) { b.capacity() } else { 0 };
        let mut total: usize = data.buffers().iter().map(&mut once).sum();
        total += data.nulls().map_or(0, |n| once(n.buffer()));
        total + data.child_data().iter().map(|c| add(c, seen)).sum::<usize>()
    }
    let mut seen = HashSet::new();
    batches.iter().flat_map(RecordBatch::columns).map(|c| add(&c.to_data(), &mut seen)).sum()
}

/// Memory bandwidth of all threads together over 1 GiB, (write, read) in bytes per second: the
/// best of three passes after one that faults the pages in. Writes fill the buffer with a value
/// per chunk, reads sum it.
fn memory_bandwidth() -> (f64, f64) {
    const BYTES: usize = 1 << 30;
    let mut buf = vec![0u64; BYTES / 8];
    let (mut write, mut read) = (0f64, 0f64);
    for pass in 0..4u64 {
        let t = Instant::now();
        buf.par_chunks_mut(1 << 16).enumerate().for_each(|(i, c)| c.fill(i as u64 ^ pass));
        let w = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let sum: u64 = buf.par_chunks(1 << 16).map(|c| c.iter().fold(0u64, |a, &x| a.wrapping_add(x))).sum();
        let r = t.elapsed().as_secs_f64();
        std::hint::black_box(sum);
        if pass > 0 {
            write = write.max(BYTES as f64 / w);
            read = read.max(BYTES as f64 / r);
        }
    }
    (write, read)
}

/// The floor of each load at this machine's memory bandwidth, against the best rounds.
fn floor_report(best_events: f64, best_all: f64, events_bytes: usize, derived_bytes: usize, events: usize) {
    let (write, read) = memory_bandwidth();
    let gb = |b: f64| b / 1e9;
    println!(
        "memory bandwidth, {} threads: write {:.1} GB/s, read {:.1} GB/s",
        rayon::current_num_threads(),
        gb(write),
        gb(read)
    );
    let events_floor = events_bytes as f64 / write;
    println!(
        "events table {:.2} GB: writing it takes {events_floor:.3} s; the best load {best_events:.3} s is {:.1}x that",
        gb(events_bytes as f64),
        best_events / events_floor
    );
    // Time, kind and region of every event: 8 + 1 + 4 bytes.
    let derive = best_all - best_events;
    let derived_floor = derived_bytes as f64 / write + (13 * events) as f64 / read;
    let derived_gb = gb(derived_bytes as f64);
    if derive <= 0.0 {
        // Only on fresh pages, where each load measures how fast the host backs them.
        println!(
            "derived tables {derived_gb:.2} GB: writing them and reading time, kind and region of each event takes {derived_floor:.3} s; the load with derived tables was not slower than the events load alone, so it gives no derivation time (run more rounds with MIMALLOC_PURGE_DELAY=-1)"
        );
        return;
    }
    println!(
        "derived tables {derived_gb:.2} GB: writing them and reading time, kind and region of each event takes {derived_floor:.3} s; the best derivation {derive:.3} s is {:.1}x that; +50% of the events load is {:.3} s, {:.1}x",
        derive / derived_floor,
        best_events / 2.0,
        best_events / 2.0 / derived_floor
    );
}
