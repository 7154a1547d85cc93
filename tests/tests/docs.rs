//! README stays in step with the code: every table and column of the model, every SQL function
//! and every saved query is documented there.

use commdb_tests::project_root;

fn readme() -> String {
    std::fs::read_to_string(project_root().join("README.md")).expect("README.md")
}

#[test]
fn readme_documents_every_table_and_column() {
    let text = readme();
    for t in commdb_catalog::model::TABLES {
        assert!(text.contains(&format!("### {}", t.name)), "README lacks table {}", t.name);
        for c in t.columns {
            let row = format!("| {} | {} | {} |", c.name, (c.data_type)(), c.meaning);
            assert!(text.contains(&row), "README lacks or differs for {}.{}: expected {row}", t.name, c.name);
        }
    }
}

#[test]
fn readme_documents_every_function_and_saved_query() {
    let text = readme();
    for f in commdb_udfs::functions() {
        assert!(text.contains(&format!("`{}", f.name)), "README lacks function {}", f.name);
    }
    for entry in std::fs::read_dir(project_root().join("queries")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".sql") {
            assert!(text.contains(&format!("`{name}`")), "README lacks saved query {name}");
        }
    }
}
