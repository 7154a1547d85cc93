//! The memory a trace and its queries may take: the default budget of queries (from the
//! machine's memory and the process's address-space limit), and what a trace's tables take in
//! memory per event, by which opening decides to read a trace whole or convert it into a store.

/// Bytes a trace's tables take in memory per event, derived tables included (measured: 20 M
/// events peak at 2.2 GB, 50 M at 5.6 GB).
pub const BYTES_PER_EVENT: u64 = 110;

/// The default memory budget of queries: three quarters of the machine's memory (8 GiB when
/// it cannot be read), and at most half of the process's address space when that is limited
/// (`ulimit -v`), so that a query stops with the budget's error rather than failing to allocate.
pub fn default_memory_limit() -> usize {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        text.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<usize>().ok())
    });
    let machine = total_kib.map_or(8 << 30, |kib| kib / 4 * 3 * 1024);
    address_space_limit().map_or(machine, |limit| machine.min(limit / 2))
}

/// The limit on the process's address space (`ulimit -v`, RLIMIT_AS) in bytes, when there is
/// one (read from /proc/self/limits; None where that file does not exist).
pub fn address_space_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..].split_whitespace().next()?.parse().ok()
}
