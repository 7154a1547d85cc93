//! Scheduler log benchmark: writes a Standard Workload Format log of JOBS jobs (plain and
//! gzip-compressed) and a sacct -P output of the same jobs, then times reading each into a
//! table. Prints jobs/s and peak memory (VmHWM).
//! `cargo bench -p commdb-shell --bench jobs -- [JOBS]` (default 500,000).

mod common;
use common::peak_rss_mib;

use std::io::Write;
use std::time::Instant;

use commdb_catalog::jobs::{self, LogKind};

fn main() {
    let n: usize = std::env::args().skip(1).find_map(|a| a.replace('_', "").parse().ok()).unwrap_or(500_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let swf = dir.path().join("log.swf");
    let gz = dir.path().join("log.swf.gz");
    let sacct = dir.path().join("sacct.txt");
    {
        let mut plain = std::io::BufWriter::new(std::fs::File::create(&swf).unwrap());
        let mut packed =
            flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::default());
        let mut s = std::io::BufWriter::new(std::fs::File::create(&sacct).unwrap());
        writeln!(plain, "; Version: 2\n; UnixStartTime: 1772445600").unwrap();
        packed.write_all(b"; Version: 2\n; UnixStartTime: 1772445600\n").unwrap();
        writeln!(s, "JobID|JobName|User|Partition|State|ExitCode|Start|End|Elapsed|NNodes|NodeList").unwrap();
        for j in 0..n {
            let line = format!(
                "{} {} {} {} {} -1 -1 {} {} -1 1 {} 1 -1 1 -1 -1 -1\n",
                j + 1,
                j * 7,
                j % 600,
                60 + j % 86_400,
                1 << (j % 9),
                1 << (j % 9),
                7200,
                j % 500
            );
            plain.write_all(line.as_bytes()).unwrap();
            packed.write_all(line.as_bytes()).unwrap();
            let first = j % 4000;
            writeln!(
                s,
                "{}|job{}|u{}|compute|COMPLETED|0:0|2026-03-02T10:{:02}:00|2026-03-02T11:{:02}:00|01:00:00|4|node[{:04}-{:04}]",
                j + 1000,
                j,
                j % 500,
                j % 60,
                j % 60,
                first,
                first + 3
            )
            .unwrap();
        }
        packed.finish().unwrap();
    }
    for (what, path, kind) in
        [("SWF", &swf, LogKind::Swf), ("SWF, gzip", &gz, LogKind::Swf), ("sacct -P", &sacct, LogKind::Sacct)]
    {
        let t = Instant::now();
        let b = jobs::read(path, kind).expect("read");
        let s = t.elapsed().as_secs_f64();
        assert_eq!(b.num_rows(), n);
        println!(
            "{what:<10} {n:>9} jobs {s:>7.3} s {:>8.2} M jobs/s  {:>6.1} MB file  peak {:>6.0} MiB",
            n as f64 / s / 1e6,
            std::fs::metadata(path).unwrap().len() as f64 / 1e6,
            peak_rss_mib()
        );
    }
}
