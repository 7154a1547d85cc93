//! The session's `information_schema`: DataFusion's own (tables, columns, views, schemata,
//! settings, routines, parameters), with commdb's table functions described in `routines`
//! (description, syntax) and `parameters` (name, type, default, in order). DataFusion 55 lists
//! a table function with NULL for all of these, and `SHOW FUNCTIONS` reads them from here, so
//! the session registers this schema in its catalog instead of switching on DataFusion's.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray, UInt8Array, UInt64Array};
use async_trait::async_trait;
use datafusion::catalog::information_schema::{INFORMATION_SCHEMA, InformationSchemaProvider};
use datafusion::catalog::{CatalogProviderList, SchemaProvider, Session, TableFunction, TableProvider};
use datafusion::datasource::{MemTable, TableType};
use datafusion::error::Result;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::union::UnionExec;

/// How a table function describes itself in the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutineDoc {
    pub name: String,
    pub description: String,
    pub syntax: String,
    pub parameters: Vec<ParameterDoc>,
}

/// One parameter of a table function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParameterDoc {
    pub name: String,
    pub data_type: String,
    /// SQL text of the default; None when the parameter must be given.
    pub default: Option<String>,
}

/// `information_schema` with commdb's table functions described.
#[derive(Debug)]
pub struct InformationSchema {
    inner: InformationSchemaProvider,
    catalog: String,
    schema: String,
    routines: Vec<RoutineDoc>,
}

impl InformationSchema {
    /// DataFusion's schema over `catalogs` and its own `table_functions` (those `routines`
    /// does not describe), and `routines`, listed under `catalog`.`schema`.
    pub fn new(
        catalogs: Arc<dyn CatalogProviderList>,
        table_functions: std::collections::HashMap<String, Arc<TableFunction>>,
        catalog: &str,
        schema: &str,
        routines: Vec<RoutineDoc>,
    ) -> Self {
        let own = table_functions.into_iter().filter(|(name, _)| !routines.iter().any(|r| &r.name == name)).collect();
        InformationSchema {
            inner: InformationSchemaProvider::new(catalogs).with_table_functions(own),
            catalog: catalog.to_string(),
            schema: schema.to_string(),
            routines,
        }
    }

    fn text(values: impl IntoIterator<Item = Option<String>>) -> ArrayRef {
        Arc::new(values.into_iter().collect::<StringArray>())
    }

    /// The rows commdb adds to `routines`.
    fn routine_rows(&self, table: &dyn TableProvider) -> Result<RecordBatch> {
        let n = self.routines.len();
        let same = |v: &str| Self::text((0..n).map(|_| Some(v.to_string())));
        let names = || Self::text(self.routines.iter().map(|r| Some(r.name.clone())));
        let columns: Vec<ArrayRef> = vec![
            same(&self.catalog),
            same(&self.schema),
            names(),
            same(&self.catalog),
            same(&self.schema),
            names(),
            same("FUNCTION"),
            Arc::new(BooleanArray::from(vec![false; n])),
            same("TABLE"),
            same("TABLE"),
            Self::text(self.routines.iter().map(|r| Some(r.description.clone()))),
            Self::text(self.routines.iter().map(|r| Some(r.syntax.clone()))),
        ];
        Ok(RecordBatch::try_new(table.schema(), columns)?)
    }

    /// The rows commdb adds to `parameters`: one IN row per parameter, in order.
    fn parameter_rows(&self, table: &dyn TableProvider) -> Result<RecordBatch> {
        let rows: Vec<(&RoutineDoc, usize, &ParameterDoc)> =
            self.routines.iter().flat_map(|r| r.parameters.iter().enumerate().map(move |(i, p)| (r, i, p))).collect();
        let n = rows.len();
        let same = |v: &str| Self::text((0..n).map(|_| Some(v.to_string())));
        let columns: Vec<ArrayRef> = vec![
            same(&self.catalog),
            same(&self.schema),
            Self::text(rows.iter().map(|(r, _, _)| Some(r.name.clone()))),
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|(_, i, _)| *i as u64 + 1))),
            same("IN"),
            Self::text(rows.iter().map(|(_, _, p)| Some(p.name.clone()))),
            Self::text(rows.iter().map(|(_, _, p)| Some(p.data_type.clone()))),
            Self::text(rows.iter().map(|(_, _, p)| p.default.clone())),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(UInt8Array::from(vec![0u8; n])),
        ];
        Ok(RecordBatch::try_new(table.schema(), columns)?)
    }
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        self.inner.table_names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let Some(table) = self.inner.table(name).await? else { return Ok(None) };
        let extra = match name.to_ascii_lowercase().as_str() {
            "routines" => self.routine_rows(table.as_ref())?,
            "parameters" => self.parameter_rows(table.as_ref())?,
            _ => return Ok(Some(table)),
        };
        let rows = MemTable::try_new(table.schema(), vec![vec![extra]])?;
        Ok(Some(Arc::new(WithRows { table, rows })))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.inner.table_exist(name)
    }
}

/// A catalog table with more rows.
#[derive(Debug)]
struct WithRows {
    table: Arc<dyn TableProvider>,
    rows: MemTable,
}

#[async_trait]
impl TableProvider for WithRows {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.table.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let own = self.table.scan(state, projection, &[], None).await?;
        let added = self.rows.scan(state, projection, &[], None).await?;
        UnionExec::try_new(vec![own, added])
    }
}

/// The name DataFusion gives the schema.
pub const NAME: &str = INFORMATION_SCHEMA;
