//! Every SQL function is what its declaration says: each table function, planned on a
//! generated trace, has the declared output columns with the declared types and nullability; every declared
//! parameter can be given by name; information_schema and `SHOW FUNCTIONS` describe the table
//! functions from the same declarations.

use arrow::array::{Array, AsArray};
use commdb_analysis::declare::Output;
use commdb_catalog::OpenOptions;
use commdb_udfs::{Kind, functions};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn session() -> commdb_catalog::Session {
    let mut session = commdb_tests::session();
    session.open("generate:ranks=16,ranks-per-node=4,iterations=4", None, &OpenOptions::default()).unwrap();
    session
}

/// A small Parquet file, written once for the tests of this file.
fn parquet_file() -> std::path::PathBuf {
    static FILE: std::sync::OnceLock<(tempfile::TempDir, std::path::PathBuf)> = std::sync::OnceLock::new();
    let (_, path) = FILE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ranks.parquet");
        let column: arrow::array::ArrayRef = std::sync::Arc::new(arrow::array::Int64Array::from(vec![0, 1, 2]));
        let batch = arrow::array::RecordBatch::try_from_iter([("rank", column)]).unwrap();
        let file = std::fs::File::create(&path).unwrap();
        let mut writer = datafusion::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        (dir, path)
    });
    path.clone()
}

/// The arguments a table function needs on the generated trace.
fn call(name: &str) -> String {
    let data = commdb_tests::test_data();
    match name {
        "read_sacct" => format!("read_sacct('{}')", data.join("sacct_jobs.txt").display()),
        "read_csv" => format!("read_csv('{}')", data.join("three_ranks.csv").display()),
        "read_parquet" => format!("read_parquet('{}')", parquet_file().display()),
        "read_swf" | "swf_header" => format!("{name}('{}')", data.join("small.swf").display()),
        "lod_calls" | "lod_messages" | "lod_collectives" => format!("{name}(pixels => 100)"),
        "compare_runs" => "compare_runs(a => 'generated', b => 'generated', by => 'rank')".to_string(),
        "scaling" => "scaling(runs => 'generated,generated')".to_string(),
        _ => format!("{name}()"),
    }
}

#[test]
fn table_functions_have_the_declared_columns() {
    let runtime = runtime();
    let mut session = session();
    let mut differ = Vec::new();
    for f in functions().iter().filter(|f| f.kind() == Kind::Table) {
        let sql = format!("SELECT * FROM {}", call(f.name));
        let batches = runtime.block_on(session.collect(&sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
        // An empty answer may come as no batch at all: then the plan's schema.
        let schema = match batches.first() {
            Some(b) => b.schema(),
            None => {
                let frame = runtime.block_on(session.context().sql(&sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
                std::sync::Arc::new(frame.schema().as_arrow().clone())
            }
        };
        let got: Vec<(String, String, bool)> =
            schema.fields().iter().map(|c| (c.name().clone(), c.data_type().to_string(), c.is_nullable())).collect();
        let declared: Vec<(String, String, bool)> =
            f.columns().iter().map(|c| (c.name.to_string(), (c.data_type)().to_string(), c.nullable)).collect();
        let part = match f.output {
            Output::Columns(_) => got.clone(),
            Output::InputThen(_) => got[got.len().saturating_sub(declared.len())..].to_vec(),
            Output::ColumnsThen(_, _) => got[..declared.len().min(got.len())].to_vec(),
            Output::Value(_) => unreachable!("a table function returns columns"),
        };
        if part != declared {
            differ.push(format!("{}: has {part:?}, declares {declared:?}", f.name));
        }
        for c in f.columns() {
            assert!(!commdb_analysis::declare::meaning(c).is_empty(), "{}.{} has no meaning", f.name, c.name);
        }
    }
    assert!(differ.is_empty(), "columns differ from their declarations:\n{}", differ.join("\n"));
}

#[test]
fn every_parameter_is_taken_by_name_and_checked() {
    let runtime = runtime();
    let mut session = session();
    for f in functions().iter().filter(|f| f.kind() == Kind::Table) {
        for p in f.params {
            // NULL by name is the default, whatever the type.
            let sql = format!("SELECT count(*) FROM {}({} => NULL)", f.name, p.name);
            let result = runtime.block_on(session.collect(&sql));
            if let Err(e) = result {
                let e = e.to_string();
                // Only a missing required argument may fail, and it says which.
                assert!(e.contains("is required") || e.contains("give resolution_ns"), "{sql}: {e}");
            }
        }
        // A parameter that is not declared is refused with the declared ones listed.
        let sql = format!("SELECT * FROM {}(colour => 1)", f.name);
        let e = runtime.block_on(session.collect(&sql)).unwrap_err().to_string();
        assert!(e.contains("unknown argument 'colour'"), "{sql}: {e}");
        assert!(e.contains(&f.names().join(", ")), "{sql}: {e}");
    }
}

#[test]
fn information_schema_describes_table_functions() {
    let runtime = runtime();
    let mut session = session();
    let rows = runtime
        .block_on(session.collect(
            "SELECT routine_name, description, syntax_example FROM information_schema.routines \
             WHERE function_type = 'TABLE' AND routine_name = 'latency_trend'",
        ))
        .unwrap();
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    let trend = commdb_udfs::function("latency_trend").unwrap();
    assert_eq!(rows[0].column(1).as_string::<i32>().value(0), trend.description);
    assert_eq!(rows[0].column(2).as_string::<i32>().value(0), trend.signature());

    let rows = runtime
        .block_on(session.collect(
            "SELECT parameter_name, data_type, parameter_default FROM information_schema.parameters \
             WHERE specific_name = 'latency_trend' ORDER BY ordinal_position",
        ))
        .unwrap();
    let names: Vec<String> = rows
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(|i| b.column(0).as_string::<i32>().value(i).to_string()))
        .collect();
    assert_eq!(names, trend.names());
    let window = names.iter().position(|n| n == "window").unwrap();
    assert_eq!(rows[0].column(2).as_string::<i32>().value(window), "5");
    assert!(rows[0].column(2).is_valid(0), "bin_ns has a default chosen when planned: NULL as SQL text");

    // Every table function commdb declares has its row, and no row of it is NULL.
    let rows = runtime
        .block_on(session.collect(
            "SELECT count(*) FROM information_schema.routines WHERE function_type = 'TABLE' AND description IS NOT NULL",
        ))
        .unwrap();
    let described = rows[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0);
    let declared = functions().iter().filter(|f| f.kind() == Kind::Table).count() as i64;
    assert_eq!(described, declared);

    // SHOW FUNCTIONS reads the same rows.
    let rows = runtime.block_on(session.collect("SHOW FUNCTIONS LIKE 'attribution'")).unwrap();
    let schema = rows[0].schema();
    let description = schema.index_of("description").unwrap();
    assert_eq!(
        rows[0].column(description).as_string::<i32>().value(0),
        commdb_udfs::function("attribution").unwrap().description
    );
}

#[test]
fn every_table_function_runs_on_runs_with_time_no_region_covers() {
    // A run without an enclosing region, whose compute is uninstrumented (as Extrae's traces
    // and selective instrumentation leave them): every analysis answers, and none with an
    // error that time outside every region would cause.
    let runtime = runtime();
    let mut session = commdb_tests::session();
    let spec =
        "generate:ranks=16,ranks-per-node=4,iterations=6,imbalance=3:3,no-enclosing-region,uninstrumented-compute";
    session.open(spec, None, &OpenOptions::default()).unwrap();
    for f in functions().iter().filter(|f| f.kind() == Kind::Table) {
        let sql = format!("SELECT count(*) FROM {}", call(f.name));
        runtime.block_on(session.collect(&sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

#[test]
fn every_table_function_that_reads_a_relation_takes_it_first() {
    use commdb_analysis::params::Type;
    for f in functions().iter().filter(|f| f.kind() == Kind::Table) {
        if f.params.iter().any(|p| p.ty == Type::Relation) {
            assert_eq!(f.params[0].ty, Type::Relation, "{}: its first parameter is {}", f.name, f.params[0].name);
        }
    }
}
