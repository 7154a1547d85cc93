//! How commdb's tables and analyses cross the network between a cluster's client, scheduler
//! and executors. Ballista sends a query to the scheduler as a logical plan and each task to an
//! executor as a physical plan, both in datafusion-proto's protobuf; what DataFusion does not
//! know goes through an extension codec. These codecs wrap Ballista's own and add:
//!
//! - a store's table (`TraceTable`): the store's directory, the table and the trace's schema
//!   name. Every process opens the store itself (its manifest and small tables, a few
//!   milliseconds, once per process) and scans the Parquet parts in place: all processes must
//!   see the store at the same path.
//! - a scan of a store's parts (`StoreScan`, over DataFusion's own Parquet scan): the store,
//!   the table and the columns it checks (the parts it reads are its scan's). Each executor
//!   checks what its tasks read of a part (the tail and those columns) against the manifest's
//!   checksums, once per piece and process, as one process does; the client and the scheduler
//!   read no part.
//! - an analysis (`Derived` while planned, `AnalysisExec` once planned): a recipe, the
//!   function's name, its arguments and the relations it looked up (commdb_analysis::recipe); the
//!   receiving process plans the call again and gets the same work.
//! - views an analysis reads (`ViewTable`, `OrderedView` and its `InOrder` node): their plans;
//!   an ordered view inlined in a plan (`Ordered`): its keys.
//! - one partition padded as the first of some (`Padded`, what an exchange of a step of one
//!   task reads): how many.
//! - a small table held in the client (an attached scheduler log, a `CREATE TABLE AS`): its
//!   rows, as Arrow IPC, up to 8 MiB.
//! - `wallclock()`: the trace starts it reads; the checked integer operators
//!   (commdb_catalog::session::checked) by their names.
//!
//! Everything else, DataFusion's own tables and nodes and Ballista's shuffles, goes through
//! Ballista's codecs unchanged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use arrow::datatypes::{Schema, SchemaRef};
use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use commdb_analysis::node::AnalysisCall;
use commdb_analysis::ordered::{InOrder, Ordered, OrderedView};
use commdb_analysis::plan::Call;
use commdb_analysis::plan::{Placement, Stage};
use commdb_analysis::relation::Lookup;
use commdb_analysis::routes::Padded;
use commdb_catalog::session::trace_table::{StoreScan, TraceTable};
use commdb_catalog::trace::Trace;
use commdb_catalog::wallclock::{Notices, TraceStarts};
use datafusion::catalog::TableProvider;
use datafusion::catalog::view::ViewTable;
use datafusion::common::{TableReference, exec_err, plan_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{AggregateUDF, Extension, LogicalPlan, ScalarUDF};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use datafusion_proto::logical_plan::{AsLogicalPlan, LogicalExtensionCodec};
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use datafusion_proto::protobuf::{LogicalExprNode, LogicalPlanNode};
use prost::Message;

/// What every buffer of commdb's own starts with, then a byte saying what follows.
const MAGIC: &[u8] = b"commdb\x01";
const STORED: u8 = b'S';
const ANALYSIS: u8 = b'A';
const VIEW: u8 = b'V';
const ORDERED: u8 = b'O';
const IN_ORDER: u8 = b'I';
const WALLCLOCK: u8 = b'W';
const MEMORY: u8 = b'M';
const ORDERED_NODE: u8 = b'R';
const STORE_SCAN: u8 = b'C';
const PADDED: u8 = b'P';

/// The largest table in memory sent with a query (an attached scheduler log, a CREATE TABLE
/// AS result): the plan travels in one gRPC message.
const MAX_MEMORY_TABLE_BYTES: usize = 8 << 20;

/// A table of a store.
#[derive(Clone, PartialEq, Message)]
struct StoredNode {
    #[prost(string, tag = "1")]
    dir: String,
    #[prost(string, tag = "2")]
    table: String,
    #[prost(string, tag = "3")]
    trace: String,
}

/// A scan of a store's parts: the store, the table and the columns whose checksums it checks
/// (the parts it reads are its scan's, below it).
#[derive(Clone, PartialEq, Message)]
struct StoreScanNode {
    #[prost(message, optional, tag = "1")]
    table: Option<StoredNode>,
    #[prost(string, repeated, tag = "3")]
    read: Vec<String>,
}

/// A relation an analysis looked up, or a schema it found to hold a trace.
#[derive(Clone, PartialEq, Message)]
struct LookupNode {
    #[prost(string, tag = "1")]
    reference: String,
    /// The relation's table, as this codec encodes tables.
    #[prost(bytes = "vec", tag = "2")]
    provider: Vec<u8>,
    #[prost(message, optional, tag = "3")]
    schema: Option<datafusion_proto::protobuf::Schema>,
    /// For a trace schema: its catalog and schema (and nothing else).
    #[prost(string, optional, tag = "4")]
    trace_catalog: Option<String>,
    #[prost(string, optional, tag = "5")]
    trace_schema: Option<String>,
}

/// A call of an analysis, with the identity of the call and the columns read.
#[derive(Clone, PartialEq, Message)]
struct AnalysisNode {
    #[prost(string, tag = "1")]
    function: String,
    #[prost(message, repeated, tag = "2")]
    args: Vec<LogicalExprNode>,
    #[prost(message, repeated, tag = "3")]
    lookups: Vec<LookupNode>,
    #[prost(string, optional, tag = "4")]
    call_id: Option<String>,
    #[prost(uint32, repeated, tag = "5")]
    projection: Vec<u32>,
    #[prost(bool, tag = "6")]
    projected: bool,
    /// For an analysis another made as its input: the input numbers down to it.
    #[prost(uint32, repeated, tag = "7")]
    path: Vec<u32>,
    /// Which node of the call (`commdb_analysis::plan::Stage`) and how it reads its inputs'
    /// partitions (`commdb_analysis::plan::Placement`), for a planned node.
    #[prost(uint32, tag = "8")]
    stage: u32,
    #[prost(uint32, tag = "9")]
    placement: u32,
    /// A routed node's routes: the first rank of each part of its first input.
    #[prost(int64, repeated, tag = "10")]
    routes: Vec<i64>,
    /// ... and the key each part's rows are exchanged by.
    #[prost(int64, repeated, tag = "11")]
    route_keys: Vec<i64>,
}

/// A view's plan.
#[derive(Clone, PartialEq, Message)]
struct ViewNode {
    #[prost(message, optional, tag = "1")]
    plan: Option<LogicalPlanNode>,
    #[prost(string, optional, tag = "2")]
    definition: Option<String>,
    /// For an ordered view: its key columns, joined by commas (column names of analyses have none).
    #[prost(string, optional, tag = "3")]
    key: Option<String>,
}

/// An ordered view's node: its key columns (its input is its child plan).
#[derive(Clone, PartialEq, Message)]
struct OrderedNode {
    #[prost(string, repeated, tag = "1")]
    keys: Vec<String>,
}

/// The trace starts `wallclock()` reads.
#[derive(Clone, PartialEq, Message)]
struct StartsNode {
    #[prost(string, repeated, tag = "1")]
    names: Vec<String>,
    #[prost(int64, repeated, tag = "2")]
    starts: Vec<i64>,
    #[prost(bool, repeated, tag = "3")]
    known: Vec<bool>,
    #[prost(string, optional, tag = "4")]
    default_trace: Option<String>,
}

/// `kind` and `node` as one of commdb's buffers.
fn wrap(kind: u8, node: &impl Message, buf: &mut Vec<u8>) {
    buf.extend_from_slice(MAGIC);
    buf.push(kind);
    node.encode(buf).expect("a Vec grows as needed");
}

/// The kind and body of one of commdb's buffers; None for another codec's.
fn unwrap(buf: &[u8]) -> Option<(u8, &[u8])> {
    let rest = buf.strip_prefix(MAGIC)?;
    let (&kind, body) = rest.split_first()?;
    Some((kind, body))
}

fn decode<M: Message + Default>(what: &str, body: &[u8]) -> Result<M> {
    M::decode(body).map_err(|e| DataFusionError::Internal(format!("commdb codec: a damaged {what}: {e}")))
}

/// Stores opened by this process, by directory and schema name: opened once, and again when
/// the store at the directory was converted anew.
fn opened(dir: &Path, name: &str) -> Result<Arc<Trace>> {
    type Opened = HashMap<(PathBuf, String), Arc<Trace>>;
    static OPEN: Mutex<Option<Opened>> = Mutex::new(None);
    let key = (dir.to_path_buf(), name.to_string());
    let still = |t: &Trace| t.stored_file("events").and_then(|f| f.stamp).is_none_or(|s| s.holds());
    if let Some(t) = OPEN.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_default().get(&key)
        && still(t)
    {
        return Ok(t.clone());
    }
    if let Err(refused) = commdb_catalog::data_dirs::check(dir) {
        return plan_err!("{refused}");
    }
    if !commdb_catalog::store::is_store(dir) {
        return plan_err!(
            "{} cannot read the store {}: no {} there (every process of a cluster must see a store at the same path)",
            process_name(),
            dir.display(),
            commdb_catalog::store::MANIFEST
        );
    }
    let mut trace = commdb_catalog::store::read(dir).map_err(|e| DataFusionError::External(Box::new(e)))?;
    trace.rename(name).map_err(|e| DataFusionError::External(Box::new(e)))?;
    let trace = Arc::new(trace);
    OPEN.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_default().insert(key, trace.clone());
    Ok(trace)
}

/// Which process this is, for messages (set by the scheduler and executor commands).
pub fn process_name() -> String {
    PROCESS.read().unwrap_or_else(PoisonError::into_inner).clone()
}

static PROCESS: RwLock<String> = RwLock::new(String::new());

/// Name this process in the codec's messages ("the scheduler at ...", "executor ...").
pub fn set_process_name(name: &str) {
    *PROCESS.write().unwrap_or_else(PoisonError::into_inner) = name.to_string();
}

/// A session state with commdb's functions over `config`: what the scheduler plans a query in,
/// and what an analysis is planned again in.
pub fn commdb_state(config: SessionConfig) -> Result<SessionState> {
    let mut session = commdb_catalog::Session::with_limits(config.target_partitions(), None);
    commdb_udfs::register_all(&mut session);
    let state = session.context().state();
    // A warning an analysis raises here reaches no shell: the process logs it.
    let notices = Notices::echoed(Arc::new(|text: &str| log::warn!(target: "commdb", "notice: {text}")));
    let config = config.with_extension(Arc::new(notices));
    Ok(datafusion::execution::SessionStateBuilder::new_from_existing(state).with_config(config).build())
}

/// The logical codec: tables and analyses from the client to the scheduler.
#[derive(Debug, Default)]
pub struct LogicalCodec {
    ballista: BallistaLogicalExtensionCodec,
}

impl LogicalCodec {
    fn encode_lookups(&self, call: &Call) -> Result<Vec<LookupNode>> {
        call.lookups
            .iter()
            .map(|l| match l {
                Lookup::Relation(r) => {
                    let mut provider = Vec::new();
                    self.try_encode_table_provider(&r.reference, r.provider.clone(), &mut provider)?;
                    let schema = datafusion_proto::protobuf::Schema::try_from(r.provider.schema().as_ref())?;
                    Ok(LookupNode {
                        reference: r.reference.to_quoted_string(),
                        provider,
                        schema: Some(schema),
                        trace_catalog: None,
                        trace_schema: None,
                    })
                }
                Lookup::TraceSchema(catalog, schema) => Ok(LookupNode {
                    trace_catalog: Some(catalog.clone()),
                    trace_schema: Some(schema.clone()),
                    ..LookupNode::default()
                }),
            })
            .collect()
    }

    fn encode_call(&self, call: &Call, call_id: Option<&str>, projection: Option<&Vec<usize>>) -> Result<AnalysisNode> {
        let args = call
            .args
            .iter()
            .map(|e| datafusion_proto::logical_plan::to_proto::serialize_expr(e, self))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(AnalysisNode {
            function: call.function.name.to_string(),
            args,
            lookups: self.encode_lookups(call)?,
            call_id: call_id.map(str::to_string),
            projection: projection.map(|p| p.iter().map(|&i| i as u32).collect()).unwrap_or_default(),
            projected: projection.is_some(),
            path: call.path.iter().map(|&i| i as u32).collect(),
            stage: 0,
            placement: 0,
            routes: Vec::new(),
            route_keys: Vec::new(),
        })
    }

    /// The call `node` describes, its relations decoded.
    fn decode_call(&self, node: &AnalysisNode, ctx: &TaskContext) -> Result<Call> {
        let Some(declaration) = commdb_udfs::function(&node.function) else {
            return plan_err!("{}: not a function this commdb knows (a different version?)", node.function);
        };
        let args = node
            .args
            .iter()
            .map(|e| datafusion_proto::logical_plan::from_proto::parse_expr(e, ctx, self))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let mut lookups = Vec::with_capacity(node.lookups.len());
        for l in &node.lookups {
            if let (Some(catalog), Some(schema)) = (&l.trace_catalog, &l.trace_schema) {
                lookups.push(Lookup::TraceSchema(catalog.clone(), schema.clone()));
                continue;
            }
            let Some(schema) = &l.schema else { return plan_err!("commdb codec: a relation without a schema") };
            let schema: SchemaRef = Arc::new(Schema::try_from(schema)?);
            let reference = TableReference::from(l.reference.as_str());
            let provider = self.try_decode_table_provider(&l.provider, &reference, schema, ctx)?;
            lookups.push(Lookup::Relation(commdb_analysis::relation::Relation { reference, provider }));
        }
        let path = node.path.iter().map(|&i| i as usize).collect();
        Ok(Call { function: declaration, args, lookups, path })
    }

    /// The analysis `node` describes, planned again here.
    fn plan_again(&self, node: &AnalysisNode, ctx: &TaskContext) -> Result<commdb_analysis::derived::Derived> {
        let call = self.decode_call(node, ctx)?;
        let base = commdb_state(ctx.session_config().clone())?;
        commdb_analysis::recipe::plan_again(&call, &base, node.call_id.as_deref())
    }

    fn encode_view(&self, view: &ViewTable, key: Option<&str>) -> Result<ViewNode> {
        let plan = LogicalPlanNode::try_from_logical_plan(view.logical_plan(), self)?;
        Ok(ViewNode { plan: Some(plan), definition: view.definition().cloned(), key: key.map(str::to_string) })
    }

    fn decode_view(&self, node: &ViewNode, ctx: &TaskContext) -> Result<ViewTable> {
        let Some(plan) = &node.plan else { return plan_err!("commdb codec: a view without a plan") };
        let plan: LogicalPlan = plan.try_into_logical_plan(ctx, self)?;
        Ok(ViewTable::new(plan, node.definition.clone()))
    }
}

impl LogicalExtensionCodec for LogicalCodec {
    fn try_decode(&self, buf: &[u8], inputs: &[LogicalPlan], ctx: &TaskContext) -> Result<Extension> {
        let body = match unwrap(buf) {
            Some((ANALYSIS, body)) => body,
            Some((ORDERED_NODE, body)) => {
                let node: OrderedNode = decode("ordered view", body)?;
                let [input] = inputs else { return plan_err!("commdb codec: an ordered view has one input") };
                return match Ordered::plan(input.clone(), node.keys)? {
                    LogicalPlan::Extension(extension) => Ok(extension),
                    _ => plan_err!("commdb codec: an ordered view decoded as another plan"),
                };
            }
            _ => return self.ballista.try_decode(buf, inputs, ctx),
        };
        let node: AnalysisNode = decode("analysis call", body)?;
        let table: Arc<dyn TableProvider> = Arc::new(self.plan_again(&node, ctx)?);
        let projection = node.projected.then(|| node.projection.iter().map(|&i| i as usize).collect());
        match AnalysisCall::with_inputs(table, projection, inputs.to_vec())? {
            LogicalPlan::Extension(extension) => Ok(extension),
            _ => plan_err!("{}: an analysis call decoded as another plan", node.function),
        }
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        if let Some(ordered) = node.node.as_any().downcast_ref::<Ordered>() {
            wrap(ORDERED_NODE, &OrderedNode { keys: ordered.keys().to_vec() }, buf);
            return Ok(());
        }
        let Some(call) = node.node.as_any().downcast_ref::<AnalysisCall>() else {
            return self.ballista.try_encode(node, buf);
        };
        let derived = call.derived();
        let Some(recipe) = derived.call() else {
            return plan_err!("{}: an analysis made without its function cannot run on a cluster", derived.name());
        };
        let node = self.encode_call(recipe, derived.call_id(), call.projection())?;
        wrap(ANALYSIS, &node, buf);
        Ok(())
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        let Some((kind, body)) = unwrap(buf) else {
            return self.ballista.try_decode_table_provider(buf, table_ref, schema, ctx);
        };
        match kind {
            STORED => {
                let node: StoredNode = decode("store table", body)?;
                let trace = opened(Path::new(&node.dir), &node.trace)?;
                let Some(doc) = commdb_catalog::model::TABLES.iter().find(|t| t.name == node.table) else {
                    return plan_err!("{}: no table {} in a commdb store", node.dir, node.table);
                };
                let partitions = ctx.session_config().target_partitions();
                let table = TraceTable::new(trace, doc.name, doc.schema(), partitions);
                Ok(Arc::new(table))
            }
            ANALYSIS => {
                let node: AnalysisNode = decode("analysis", body)?;
                Ok(Arc::new(self.plan_again(&node, ctx)?))
            }
            VIEW => {
                let node: ViewNode = decode("view", body)?;
                Ok(Arc::new(self.decode_view(&node, ctx)?))
            }
            ORDERED => {
                let node: ViewNode = decode("ordered view", body)?;
                let keys = node.key.clone().unwrap_or_default();
                let keys: Vec<&str> = keys.split(',').collect();
                Ok(Arc::new(OrderedView::new(self.decode_view(&node, ctx)?, &keys)))
            }
            MEMORY => {
                let reader = arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(body), None)?;
                let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
                Ok(Arc::new(datafusion::datasource::MemTable::try_new(schema, vec![batches])?))
            }
            other => plan_err!("commdb codec: unknown table kind {other}"),
        }
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        // An analysis shared among a query's scans crosses as the analysis.
        let node = match node.downcast_ref::<commdb_analysis::shared::Shared>() {
            Some(shared) => shared.inner().clone(),
            None => node,
        };
        if let Some(table) = node.downcast_ref::<TraceTable>() {
            let trace = table.trace();
            let Some(dir) = trace.store_dir() else {
                return plan_err!(
                    "{table_ref}: trace '{}' is not a commdb store; a cluster reads stores only: convert it with `commdb convert {} DIR` and open DIR",
                    trace.meta.name,
                    trace.meta.path
                );
            };
            // The other processes may run in other directories.
            let dir = std::path::absolute(&dir).unwrap_or(dir);
            let node = StoredNode {
                dir: dir.to_string_lossy().into_owned(),
                table: table.table().to_string(),
                trace: trace.meta.name.clone(),
            };
            wrap(STORED, &node, buf);
            return Ok(());
        }
        if let Some(derived) = node.downcast_ref::<commdb_analysis::derived::Derived>() {
            let Some(call) = derived.call() else {
                return plan_err!("{table_ref}: an analysis made without its function cannot run on a cluster");
            };
            let node = self.encode_call(call, derived.call_id(), None)?;
            wrap(ANALYSIS, &node, buf);
            return Ok(());
        }
        if let Some(ordered) = node.downcast_ref::<OrderedView>() {
            let node = self.encode_view(ordered.view(), Some(&ordered.keys().join(",")))?;
            wrap(ORDERED, &node, buf);
            return Ok(());
        }
        if let Some(view) = node.downcast_ref::<ViewTable>() {
            let node = self.encode_view(view, None)?;
            wrap(VIEW, &node, buf);
            return Ok(());
        }
        if let Some(memory) = node.downcast_ref::<datafusion::datasource::MemTable>() {
            let mut body = Vec::new();
            {
                let mut writer = arrow::ipc::writer::StreamWriter::try_new(&mut body, &memory.schema())?;
                for partition in &memory.batches {
                    let Ok(batches) = partition.try_read() else {
                        return plan_err!("{table_ref}: the table is being written; try again");
                    };
                    for b in batches.iter() {
                        writer.write(b)?;
                    }
                }
                writer.finish()?;
            }
            if body.len() > MAX_MEMORY_TABLE_BYTES {
                return plan_err!(
                    "{table_ref}: a table held in the client ({} MiB) is too large to send with a query (at most {} MiB): write it to a file the cluster reads, or narrow it",
                    body.len() >> 20,
                    MAX_MEMORY_TABLE_BYTES >> 20
                );
            }
            buf.extend_from_slice(MAGIC);
            buf.push(MEMORY);
            buf.extend_from_slice(&body);
            return Ok(());
        }
        self.ballista.try_encode_table_provider(table_ref, node, buf).map_err(|e| {
            DataFusionError::Plan(format!(
                "{table_ref}: this table cannot be sent to a cluster (only a store's tables, views and commdb's analyses can): {e}"
            ))
        })
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn datafusion::datasource::file_format::FileFormatFactory>> {
        self.ballista.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn datafusion::datasource::file_format::FileFormatFactory>,
    ) -> Result<()> {
        self.ballista.try_encode_file_format(buf, node)
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        decode_udf(name, buf).unwrap_or_else(|| self.ballista.try_decode_udf(name, buf))
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        if encode_udf(node, buf) { Ok(()) } else { self.ballista.try_encode_udf(node, buf) }
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        decode_udaf(name).unwrap_or_else(|| self.ballista.try_decode_udaf(name, buf))
    }
}

/// `wallclock()` with the trace starts it reads; false for another function.
fn encode_udf(node: &ScalarUDF, buf: &mut Vec<u8>) -> bool {
    let Some(wallclock) = node.inner().downcast_ref::<commdb_udfs::clock::wallclock::Wallclock>() else { return false };
    let starts = wallclock.starts().read().unwrap_or_else(PoisonError::into_inner);
    let mut node = StartsNode { default_trace: starts.default_trace().map(str::to_string), ..StartsNode::default() };
    for (name, start) in starts.entries() {
        node.names.push(name.to_string());
        node.starts.push(start.unwrap_or(0));
        node.known.push(start.is_some());
    }
    wrap(WALLCLOCK, &node, buf);
    true
}

/// The aggregate functions the session's rules write into plans (`checked_sum`).
fn decode_udaf(name: &str) -> Option<Result<Arc<AggregateUDF>>> {
    (name == commdb_catalog::session::checked_sum::NAME)
        .then(|| Ok(Arc::new(commdb_catalog::session::checked_sum::udaf())))
}

fn decode_udf(name: &str, buf: &[u8]) -> Option<Result<Arc<ScalarUDF>>> {
    if let Some(checked) = commdb_catalog::session::checked::operator(name) {
        return Some(Ok(Arc::new(checked)));
    }
    let (kind, body) = unwrap(buf)?;
    if kind != WALLCLOCK {
        return Some(plan_err!("commdb codec: {name} is not a function with state"));
    }
    let node: StartsNode = match decode("wallclock", body) {
        Ok(n) => n,
        Err(e) => return Some(Err(e)),
    };
    let mut starts = TraceStarts::default();
    for ((name, start), known) in node.names.iter().zip(&node.starts).zip(&node.known) {
        starts.insert(name, known.then_some(*start), node.default_trace.as_deref() == Some(name.as_str()));
    }
    let udf = commdb_udfs::clock::wallclock::Wallclock::new(Arc::new(RwLock::new(starts)), Notices::default());
    Some(Ok(Arc::new(ScalarUDF::from(udf))))
}

/// The physical codec: analyses from the scheduler to the executors.
#[derive(Debug, Default)]
pub struct PhysicalCodec {
    ballista: BallistaPhysicalExtensionCodec,
    logical: LogicalCodec,
}

impl PhysicalExtensionCodec for PhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some((kind, body)) = unwrap(buf) else {
            return self.ballista.try_decode(buf, inputs, ctx, proto_converter);
        };
        match kind {
            ANALYSIS => {
                let node: AnalysisNode = decode("analysis", body)?;
                let derived = self.logical.plan_again(&node, ctx)?;
                let projection: Option<Vec<usize>> =
                    node.projected.then(|| node.projection.iter().map(|&i| i as usize).collect());
                let (Some(stage), Some(placement)) =
                    (Stage::from_code(node.stage), Placement::from_code(node.placement))
                else {
                    return plan_err!(
                        "{}: a node of a kind this commdb does not know (a different version?)",
                        node.function
                    );
                };
                if placement == Placement::Routed {
                    let routes = commdb_analysis::routes::Routes::new(node.routes, node.route_keys)?;
                    return Ok(Arc::new(derived.routed_node(stage, inputs.to_vec(), projection.as_ref(), routes)?));
                }
                Ok(Arc::new(derived.node(stage, placement, inputs.to_vec(), projection.as_ref())?))
            }
            STORE_SCAN => {
                let node: StoreScanNode = decode("store scan", body)?;
                let ([inner], Some(table)) = (inputs, node.table) else {
                    return exec_err!("commdb codec: a store's scan has one input and its table");
                };
                let trace = opened(Path::new(&table.dir), &table.trace)?;
                let Some(doc) = commdb_catalog::model::TABLES.iter().find(|t| t.name == table.table) else {
                    return plan_err!("{}: no table {} in a commdb store", table.dir, table.table);
                };
                let Some(file) = trace.stored_file(doc.name) else {
                    return plan_err!("{}: the store keeps no file of table {}", table.dir, table.table);
                };
                let store = ctx.runtime_env().object_store(ObjectStoreUrl::local_filesystem())?;
                let scan = StoreScan::over(trace, doc.name, file, node.read, inner.clone(), store)?;
                Ok(Arc::new(scan))
            }
            IN_ORDER => {
                // The key columns' indices, four bytes each.
                if body.is_empty() || body.len() % 4 != 0 {
                    return exec_err!("commdb codec: a damaged InOrder node ({} bytes of keys)", body.len());
                }
                let keys: Vec<usize> =
                    body.chunks_exact(4).map(|k| u32::from_le_bytes([k[0], k[1], k[2], k[3]]) as usize).collect();
                match inputs {
                    [input] => Ok(Arc::new(InOrder::new(input.clone(), keys))),
                    _ => exec_err!("commdb codec: InOrder has one input, got {}", inputs.len()),
                }
            }
            PADDED => {
                // How many partitions, four bytes.
                let Ok(count) = <[u8; 4]>::try_from(body) else {
                    return exec_err!("commdb codec: a damaged Padded node ({} bytes of its count)", body.len());
                };
                match inputs {
                    [input] => Ok(Arc::new(Padded::new(input.clone(), u32::from_le_bytes(count) as usize))),
                    _ => exec_err!("commdb codec: Padded has one input, got {}", inputs.len()),
                }
            }
            other => plan_err!("commdb codec: unknown plan node kind {other}"),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(analysis) = node.downcast_ref::<commdb_analysis::plan::AnalysisExec>() {
            let Some(call) = analysis.call() else {
                return plan_err!("{}: an analysis made without its function cannot run on a cluster", analysis.name());
            };
            let mut node = self.logical.encode_call(call, analysis.call_id(), analysis.projection())?;
            node.stage = analysis.stage().code();
            node.placement = analysis.placement().code();
            node.routes = analysis.routes().map(|r| r.first_ranks().to_vec()).unwrap_or_default();
            node.route_keys = analysis.routes().map(|r| r.keys().to_vec()).unwrap_or_default();
            wrap(ANALYSIS, &node, buf);
            return Ok(());
        }
        if let Some(scan) = node.downcast_ref::<StoreScan>() {
            let trace = scan.trace();
            let Some(dir) = trace.store_dir() else {
                return plan_err!("a scan of trace '{}', which is not a commdb store", trace.meta.name);
            };
            let dir = std::path::absolute(&dir).unwrap_or(dir);
            let table = StoredNode {
                dir: dir.to_string_lossy().into_owned(),
                table: scan.table().to_string(),
                trace: trace.meta.name.clone(),
            };
            wrap(STORE_SCAN, &StoreScanNode { table: Some(table), read: scan.read().to_vec() }, buf);
            return Ok(());
        }
        if let Some(in_order) = node.downcast_ref::<InOrder>() {
            buf.extend_from_slice(MAGIC);
            buf.push(IN_ORDER);
            for key in in_order.keys() {
                buf.extend_from_slice(&(*key as u32).to_le_bytes());
            }
            return Ok(());
        }
        if let Some(padded) = node.downcast_ref::<Padded>() {
            buf.extend_from_slice(MAGIC);
            buf.push(PADDED);
            buf.extend_from_slice(&(padded.partitions() as u32).to_le_bytes());
            return Ok(());
        }
        self.ballista.try_encode(node, buf, proto_converter)
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        decode_udf(name, buf).unwrap_or_else(|| self.ballista.try_decode_udf(name, buf))
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        if encode_udf(node, buf) { Ok(()) } else { self.ballista.try_encode_udf(node, buf) }
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        decode_udaf(name).unwrap_or_else(|| self.ballista.try_decode_udaf(name, buf))
    }
}
