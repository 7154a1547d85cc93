//! What the benchmarks share: peak memory of the process.

/// Peak resident memory of this process so far (VmHWM), in MiB.
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()))
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// How the allocator treats freed memory in this run, for the report's header. Pages that a
/// process frees and touches again cost almost nothing when the allocator keeps them, and up
/// to 2.5 ns per byte when it hands them back and the host has reclaimed them in the meantime
/// (a virtual machine with free page reporting). `MIMALLOC_PURGE_DELAY=-1` keeps them, so that
/// rounds after the first measure the load itself rather than the host.
#[allow(dead_code)] // used by the benchmarks that load in rounds
pub fn allocator_mode() -> &'static str {
    match std::env::var("MIMALLOC_PURGE_DELAY").as_deref() {
        Ok("-1") => "freed memory kept by the allocator (MIMALLOC_PURGE_DELAY=-1): later rounds run on warm pages",
        _ => "freed memory returned after 1 s (mimalloc default): every round may fault in fresh pages",
    }
}

/// CPU time all threads of this process have run so far, in seconds (the sum of
/// /proc/self/task/*/schedstat, nanosecond resolution); NaN where that is not available.
#[allow(dead_code)] // used by the benchmarks that report how busy the cores were
pub fn cpu_seconds() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return f64::NAN };
    let mut ns = 0u64;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        match stat.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()) {
            Some(v) => ns += v,
            None => return f64::NAN,
        }
    }
    ns as f64 / 1e9
}
