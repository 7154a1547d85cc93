//! The documentation stays in step with the code: docs/reference.md is generated from the
//! declarations of the tables and functions (`UPDATE_DOCS=1` rewrites it), README's index
//! links every table and function to it, the guide explains every function, and the saved
//! queries are all listed.

use commdb_tests::project_root;

fn read(path: &str) -> String {
    std::fs::read_to_string(project_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_reference_is_generated_from_the_declarations() {
    let generated = commdb_udfs::reference::markdown();
    let path = project_root().join("docs").join("reference.md");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let written = read("docs/reference.md");
    assert!(
        written == generated,
        "docs/reference.md differs from the declarations; run UPDATE_DOCS=1 cargo test -p commdb-tests --test behaviour docs::"
    );
    for t in commdb_catalog::model::TABLES {
        for c in t.columns {
            let row = format!("| {} | {} | {} |", c.name, (c.data_type)(), c.meaning);
            assert!(written.contains(&row), "docs/reference.md lacks {}.{}", t.name, c.name);
        }
    }
}

#[test]
fn readme_links_every_table_and_function_and_the_guide_explains_each_function() {
    let readme = read("README.md");
    let guide = read("docs/guide.md");
    for t in commdb_catalog::model::TABLES {
        let link = format!("[`{0}`](docs/reference.md#{0})", t.name);
        assert!(readme.contains(&link), "README's index lacks table {}", t.name);
    }
    for f in commdb_udfs::functions() {
        let link = format!("[`{0}`](docs/reference.md#{0})", f.name);
        assert!(readme.contains(&link), "README's index lacks function {}", f.name);
        // `name(` or `name`, so that a longer name (critical_path_profile) does not stand for it.
        let named = guide.contains(&format!("`{}(", f.name)) || guide.contains(&format!("`{}`", f.name));
        assert!(named, "docs/guide.md does not explain {}", f.name);
    }
    let lines = readme.lines().count();
    assert!(lines <= 300, "README has {lines} lines; the reference belongs in docs/");
}

#[test]
fn every_saved_query_is_listed() {
    let shell = read("docs/shell.md");
    for entry in std::fs::read_dir(project_root().join("queries")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".sql") {
            assert!(shell.contains(&format!("`{name}`")), "docs/shell.md lacks saved query {name}");
        }
    }
}
