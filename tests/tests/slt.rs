//! Runs every `tests/slt/*.slt` file on a fresh session. `COMPLETE=1 cargo test -p
//! commdb-tests --test slt` rewrites the expected output in place (read the diff before
//! committing). A file that needs ../shared/data is skipped with a message when it is absent.

use std::path::PathBuf;
use std::process::ExitCode;

use commdb_tests::{Db, project_root, shared_data};

fn slt_files(filter: Option<&str>) -> Vec<PathBuf> {
    let dir = project_root().join("tests").join("slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "slt")).collect())
        .unwrap_or_default();
    files.retain(|p| filter.is_none_or(|f| p.to_string_lossy().contains(f)));
    files.sort();
    files
}

fn main() -> ExitCode {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let complete = std::env::var_os("COMPLETE").is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for file in slt_files(filter.as_deref()) {
        let name = file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains("${SHARED}") && shared_data().is_none() {
            println!("skip {name}: ../shared/data is absent");
            skipped += 1;
            continue;
        }
        let result = runtime.block_on(async {
            let mut runner = sqllogictest::Runner::new(|| async { Ok(Db::new()) });
            if complete {
                let col_separator = " ";
                let validator = sqllogictest::default_validator;
                runner
                    .update_test_file(
                        &file,
                        col_separator,
                        validator,
                        sqllogictest::default_normalizer,
                        sqllogictest::default_column_validator,
                    )
                    .await
                    .map_err(|e| e.to_string())
            } else {
                runner.run_file_async(&file).await.map_err(|e| e.display(true).to_string())
            }
        });
        match result {
            Ok(()) => {
                println!("ok   {name}");
                passed += 1;
            }
            Err(e) => {
                println!("FAIL {name}\n{e}");
                failed += 1;
            }
        }
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
