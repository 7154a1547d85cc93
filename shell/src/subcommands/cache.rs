//! `commdb cache [--clear] [NAMES]`: the cache stores that traces bigger than the memory
//! budget were converted into, most recently opened first; with --clear, removed.

use commdb_catalog::clock::Correction;
use commdb_catalog::convert::cache;

use crate::cli::Cli;
use crate::error::{Result, ShellError};
use crate::print::human_duration;

pub fn run(cli: &Cli, clear: bool, names: &[String]) -> Result<()> {
    super::refuse_reading_options(
        cli,
        "cache",
        "which lists and removes cache stores",
        &[
            (cli.open.clock_correction != Correction::default(), "--clock-correction"),
            (cli.memory_limit.is_some(), "--memory-limit"),
        ],
    )?;
    let quiet = cli.quiet;
    let root =
        cache::cache_root().ok_or_else(|| ShellError::usage("no cache directory is known: set COMMDB_CACHE_DIR"))?;
    let all = cache::entries(&root)?;
    let chosen: Vec<&cache::Entry> = all
        .iter()
        .filter(|e| {
            names.is_empty()
                || names.iter().any(|n| {
                    e.dir.to_string_lossy().contains(n.as_str())
                        || e.source.as_deref().is_some_and(|s| s.contains(n.as_str()))
                })
        })
        .collect();
    if !names.is_empty() && chosen.is_empty() {
        return Err(ShellError::usage(format!("no cache store in {} matches {}", root.display(), names.join(", "))));
    }
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    if clear {
        for e in &chosen {
            cache::remove(e)?;
        }
        if !quiet {
            let freed: u64 = chosen.iter().map(|e| e.bytes).sum();
            eprintln!("removed {} cache store(s) from {}, {:.2} GiB", chosen.len(), root.display(), gib(freed));
        }
        return Ok(());
    }
    if chosen.is_empty() {
        println!("no cache stores in {}", root.display());
        return Ok(());
    }
    for e in &chosen {
        let ago = e
            .last_opened
            .and_then(|t| t.elapsed().ok())
            .map_or_else(|| "never opened".to_string(), |d| format!("opened {} ago", human_duration(d)));
        println!(
            "{}  {:.2} GiB  {ago}  from {}",
            e.dir.display(),
            gib(e.bytes),
            e.source.as_deref().unwrap_or("(unfinished conversion)")
        );
    }
    let total: u64 = chosen.iter().map(|e| e.bytes).sum();
    println!("{} cache store(s), {:.2} GiB; `commdb cache --clear [NAMES]` removes them", chosen.len(), gib(total));
    Ok(())
}
