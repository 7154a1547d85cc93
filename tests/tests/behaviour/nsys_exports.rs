//! Nsight Systems exports read by commdb against the same SQLite files queried by SQLite itself
//! (Python's sqlite3, the reference reader here as otf2-print is for OTF2): per file, the
//! kernels (their number and summed duration), the copies by direction (number and bytes) and
//! the point-to-point sends of nsys's MPI tables (number and bytes) must be what commdb's
//! `gpu_kernels`, `gpu_transfers` and `messages` give. The exports are tests/data/nsys: a real
//! one (hpcgroup/pipit's saxpy run on Perlmutter) and the two-rank one tests/nsys/make_export.py
//! writes. Skipped, with the reason printed, where python3 has no sqlite3.

use std::path::Path;
use std::process::Command;

use commdb_catalog::OpenOptions;

/// What SQLite says of an export: kernels, their duration, host-to-device copies and bytes,
/// device-to-host copies and bytes, MPI sends and bytes.
const REFERENCE: &str = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
def one(sql, table):
    return db.execute(sql).fetchone() if table in tables else (0, 0)
k = one("SELECT count(*), coalesce(sum(end - start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL")
h = one("SELECT count(*), coalesce(sum(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1", "CUPTI_ACTIVITY_KIND_MEMCPY")
d = one("SELECT count(*), coalesce(sum(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 2", "CUPTI_ACTIVITY_KIND_MEMCPY")
m = one("SELECT count(*), coalesce(sum(size), 0) FROM MPI_P2P_EVENTS e JOIN StringIds s ON s.id = e.textId WHERE s.value IN ('MPI_Send', 'MPI_Isend', 'MPI_Ssend', 'MPI_Bsend', 'MPI_Rsend', 'MPI_Issend')", "MPI_P2P_EVENTS")
print(*k, *h, *d, *m)
"#;

fn reference(file: &Path) -> Option<Vec<i64>> {
    let out = Command::new("python3").arg("-c").arg(REFERENCE).arg(file).output().ok()?;
    if !out.status.success() {
        println!("skip: python3's sqlite3 failed on {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).split_whitespace().map(|v| v.parse().unwrap()).collect())
}

async fn commdb(file: &Path) -> Vec<i64> {
    let mut s = commdb_tests::session();
    s.open(&file.display().to_string(), Some("t"), &OpenOptions::default()).unwrap();
    let sql = "SELECT
  (SELECT count(*) FROM gpu_kernels('t.calls')) AS kernels,
  (SELECT coalesce(sum(duration_ns), 0) FROM gpu_kernels('t.calls')) AS kernel_ns,
  (SELECT count(*) FROM gpu_transfers('t.events') WHERE direction = 'host_to_device') AS h2d,
  (SELECT coalesce(sum(bytes), 0) FROM gpu_transfers('t.events') WHERE direction = 'host_to_device') AS h2d_bytes,
  (SELECT count(*) FROM gpu_transfers('t.events') WHERE direction = 'device_to_host') AS d2h,
  (SELECT coalesce(sum(bytes), 0) FROM gpu_transfers('t.events') WHERE direction = 'device_to_host') AS d2h_bytes,
  (SELECT count(*) FROM t.messages WHERE send_ts IS NOT NULL) AS sends,
  (SELECT coalesce(sum(bytes), 0) FROM t.messages WHERE send_ts IS NOT NULL) AS send_bytes";
    let rows = commdb_tests::rows(&s.collect(sql).await.unwrap()).unwrap();
    rows[0].iter().map(|v| v.parse().unwrap()).collect()
}

#[tokio::test]
async fn kernels_copies_and_sends_agree_with_sqlite() {
    let has_sqlite = Command::new("python3").args(["-c", "import sqlite3"]).status().is_ok_and(|s| s.success());
    if !has_sqlite {
        println!("skip: python3 with sqlite3 is not installed");
        return;
    }
    let dir = commdb_tests::test_data().join("nsys");
    let files = [
        dir.join("saxpy-mpi-cuda_nsys_perlmutter0.sqlite"),
        dir.join("two_ranks/report.0.sqlite"),
        dir.join("two_ranks/report.1.sqlite"),
    ];
    for file in &files {
        let Some(expected) = reference(file) else { return };
        let got = commdb(file).await;
        assert_eq!(got, expected, "{}: commdb (left) against SQLite", file.display());
        println!("{}: kernels, kernel ns, h2d, h2d bytes, d2h, d2h bytes, sends, send bytes = {got:?}", file.display());
    }
    // Both ranks together: every send matched, and the sends' bytes are the files' sum.
    let both = commdb(&dir.join("two_ranks")).await;
    let sum: Vec<i64> = (0..8).map(|i| files[1..].iter().map(|f| reference(f).unwrap()[i]).sum()).collect();
    assert_eq!(both, sum, "two_ranks as one trace against its files");
}

/// A scratch directory of this test process.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("commdb-nsys-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn long_names_and_many_rows_span_pages() {
    if !Command::new("python3").args(["-c", "import sqlite3"]).status().is_ok_and(|s| s.success()) {
        println!("skip: python3 with sqlite3 is not installed");
        return;
    }
    // 20,000 strings (interior b-tree pages), a kernel name of 10,000 characters (overflow
    // pages), 3,000 kernels.
    let file = scratch("pages").join("big.sqlite");
    let script = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
db.execute("CREATE TABLE EXPORT_META_DATA (name TEXT NOT NULL, value TEXT)")
db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL)")
db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, "s%d" % i) for i in range(1, 20001)])
db.execute("INSERT INTO StringIds VALUES (20001, ?)", ("k" * 10000,))
db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, ?, ?)",
               [(100 * i, 100 * i + 50, i + 1, 5 << 24, 20001 if i == 0 else 1 + i % 20000) for i in range(3000)])
db.commit()
"#;
    assert!(Command::new("python3").arg("-c").arg(script).arg(&file).status().unwrap().success());
    let mut s = commdb_tests::session();
    s.open(&file.display().to_string(), Some("t"), &OpenOptions::default()).unwrap();
    let sql = "SELECT count(*) AS kernels, max(length(kernel)) AS longest, count(DISTINCT kernel) AS names, sum(duration_ns) AS ns FROM gpu_kernels('t.calls')";
    let rows = commdb_tests::rows(&s.collect(sql).await.unwrap()).unwrap();
    assert_eq!(rows, vec![vec!["3000", "10000", "3000", "150000"]]);
    std::fs::remove_dir_all(file.parent().unwrap()).ok();
}

#[test]
fn damaged_and_foreign_databases_are_errors_that_name_the_file() {
    let saxpy = commdb_tests::test_data().join("nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite");
    let bytes = std::fs::read(&saxpy).unwrap();
    let dir = scratch("damaged");
    // Cut short: the pages past the cut are missing.
    let cut = dir.join("cut.sqlite");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let e =
        commdb_catalog::formats::read(&cut.display().to_string(), &OpenOptions::default()).err().unwrap().to_string();
    assert!(e.contains("cut.sqlite"), "{e}");
    // Overwritten in the middle, page by page: never a panic, an error naming the file or a
    // trace whose tables can be built.
    let page = 4096;
    for p in (1..bytes.len() / page).step_by(7) {
        let mut damaged = bytes.clone();
        for b in &mut damaged[p * page..p * page + 64] {
            *b = 0xa5;
        }
        let path = dir.join("damaged.sqlite");
        std::fs::write(&path, &damaged).unwrap();
        match commdb_catalog::formats::read(&path.display().to_string(), &OpenOptions::default()) {
            Ok(trace) => {
                let _ = trace.build_all();
            }
            Err(e) => assert!(e.to_string().contains("damaged.sqlite"), "page {p}: {e}"),
        }
    }
    // An SQLite database that is not an export.
    let foreign = dir.join("other.sqlite");
    let mut header = bytes[..page].to_vec();
    header[28..32].copy_from_slice(&1u32.to_be_bytes());
    // Page 1 alone, its schema emptied: a database with no tables.
    header[100] = 0x0d;
    header[103..105].copy_from_slice(&0u16.to_be_bytes());
    std::fs::write(&foreign, &header).unwrap();
    let e = commdb_catalog::formats::read(&foreign.display().to_string(), &OpenOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("other.sqlite") && e.contains("not an Nsight Systems export"), "{e}");
    std::fs::remove_dir_all(dir).ok();
}
