//! `commdb scheduler` and `commdb executor`: Apache Ballista's scheduler and executor run inside
//! the commdb binary, so that they know commdb's functions (found by name) and its codecs
//! ([`crate::codec`]). Each listens where it is told, so that several executors share one
//! machine; an executor logs every task it is given, with its job and stage; Ctrl-C or SIGTERM
//! stops either cleanly.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Error;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_executor::execution_engine::{DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor};
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
type Result<T> = datafusion::error::Result<T>;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;

use crate::codec::{LogicalCodec, PhysicalCodec, commdb_state, set_process_name};
use crate::secret::Secret;
use ballista_core::extension::SessionConfigExt;

/// What `commdb executor` is told.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler to register with.
    pub scheduler: SocketAddr,
    /// Where the executor serves its shuffle files (Arrow Flight).
    pub bind: SocketAddr,
    /// Where it takes tasks (gRPC); default the next port after `bind`'s.
    pub grpc_port: Option<u16>,
    /// Where its shuffle files go (default: a fresh temporary directory).
    pub work_dir: Option<std::path::PathBuf>,
    /// Tasks it runs at once (default: the machine's cores).
    pub vcores: Option<usize>,
    /// The memory its tasks may hold together, in bytes.
    pub memory_limit: Option<u64>,
    /// The directories its tasks may read and write files under (none: anywhere its user may,
    /// allowed on loopback only).
    pub data_dirs: Vec<std::path::PathBuf>,
    /// The cluster's secret, which it presents to the scheduler and asks of whoever fetches its
    /// shuffle files (required off loopback).
    pub secret: Option<Secret>,
}

/// What `commdb scheduler` is told.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Where it listens.
    pub bind: SocketAddr,
    /// The directories its queries may read and write files under (required off loopback).
    pub data_dirs: Vec<std::path::PathBuf>,
    /// The cluster's secret, which every client and executor must present (required off
    /// loopback).
    pub secret: Option<Secret>,
}

/// A process that other machines reach must have the cluster's secret: it would run the SQL of
/// anyone who reaches its port.
fn require_secret(process: &str, bind: SocketAddr, secret: Option<&Secret>) -> crate::Result<()> {
    if secret.is_some() || bind.ip().is_loopback() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{process}: listening on {bind}, which other machines reach, it would take queries from anyone who reaches it: give the cluster's secret in {} or with --secret-file FILE (the same on every process and client)",
        crate::secret::VARIABLE
    )))
}

/// Keep this process's files under `dirs` and `work_dir` (commdb_catalog::data_dirs). A process
/// reachable from other machines must be given them: it runs the SQL of anyone who reaches it,
/// and SQL names files.
fn keep_to(
    process: &str,
    bind: SocketAddr,
    dirs: &[std::path::PathBuf],
    work_dir: Option<&std::path::Path>,
) -> crate::Result<()> {
    if dirs.is_empty() {
        if bind.ip().is_loopback() {
            return Ok(());
        }
        return Err(Error::Usage(format!(
            "{process}: listening on {bind}, which other machines reach, it would read and write any file its user may for whoever sends it SQL: give the directories its queries may use with --data-dir DIR (repeatable)"
        )));
    }
    let mut roots = dirs.to_vec();
    roots.extend(work_dir.map(std::path::Path::to_path_buf));
    commdb_catalog::data_dirs::restrict(&roots, process).map_err(Error::Usage)?;
    let shown: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    eprintln!("{} {process}: reads and writes files only under {}", now(), shown.join(", "));
    Ok(())
}

/// The time of day (UTC) with milliseconds, for log lines.
fn now() -> String {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let s = t.as_secs() % 86_400;
    format!("{:02}:{:02}:{:02}.{:03}", s / 3600, s / 60 % 60, s % 60, t.subsec_millis())
}

/// Print Ballista's warnings and errors (its own log), prefixed by the process.
struct WarningsLog;

static LOG: WarningsLog = WarningsLog;

/// Where Ballista logs that an executor starts asking for tasks (the one information it logs
/// that an operator needs: the cluster is ready when every executor does).
const REGISTRATIONS: [&str; 1] = ["ballista_executor::execution_loop"];

impl log::Log for WarningsLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn || REGISTRATIONS.contains(&metadata.target())
    }

    fn log(&self, record: &log::Record) {
        let process = crate::codec::process_name();
        if record.level() <= log::Level::Warn {
            eprintln!("{} {process} {}: {}", now(), record.level(), record.args());
            return;
        }
        let text = record.args().to_string();
        // Its first request for tasks registers it with the scheduler.
        if text.starts_with("Starting poll work loop") {
            eprintln!("{} {process}: asking the scheduler for tasks", now());
        }
    }

    fn flush(&self) {}
}

fn install_log(process: &str) {
    set_process_name(process);
    if log::set_logger(&LOG).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// Wait for Ctrl-C or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(t) => t,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// The session state the scheduler plans a query in: commdb's functions, Ballista's rules.
fn scheduler_state(mut config: SessionConfig) -> Result<datafusion::execution::SessionState> {
    // A scan reads whole files, never byte ranges of them, and each partition its own files,
    // so that each partition of a store's calls or events holds whole ranks and a sweep by
    // rank runs a task per partition (commdb_analysis::derived::Spread).
    config.options_mut().optimizer.repartition_file_scans = false;
    // Nor do a scan's partitions take each other's files as they run.
    config.options_mut().execution.enable_file_stream_work_stealing = false;
    let state = commdb_state(config)?;
    let rules = ballista_core::optimizer::with_ballista_optimizer_rules(state.optimizers());
    // Ballista 55 restricts a task's scan of rows in memory (a store's small tables, VALUES) to
    // its partitions by building the scan again without its limit, so a limit pushed into such
    // a scan was lost and every row returned. Here the limit stays a node of its own above
    // the scan (the logical optimizer still gives it to the scans of the store's files).
    let mut physical: Vec<_> =
        state.physical_optimizers().iter().filter(|r| r.name() != "LimitPushdown").cloned().collect();
    // An exchange that keeps its input's order is an exchange and a sort: a shuffle does not
    // keep it (order_kept.rs).
    physical.push(Arc::new(crate::order_kept::OrderKeptAcrossExchanges));
    // A node of one task that reads its first input in any order reads it through one shuffle
    // read (one_reader.rs).
    physical.push(Arc::new(crate::one_reader::OneReaderForOneTask));
    if commdb_catalog::data_dirs::restricted() {
        physical.push(Arc::new(crate::guard::KeepToDataDirs));
    }
    Ok(datafusion::execution::SessionStateBuilder::new_from_existing(state)
        .with_optimizer_rules(rules)
        .with_physical_optimizer_rules(physical)
        .build())
}

/// Run a scheduler until Ctrl-C or SIGTERM.
pub async fn run_scheduler(options: SchedulerOptions) -> crate::Result<()> {
    let SchedulerOptions { bind, data_dirs, secret } = options;
    let process = format!("scheduler {bind}");
    install_log(&process);
    require_secret(&process, bind, secret.as_ref())?;
    keep_to(&process, bind, &data_dirs, None)?;
    let mut config = SchedulerConfig::default().with_hostname(bind.ip().to_string()).with_port(bind.port());
    config.bind_host = bind.ip().to_string();
    config.override_logical_codec = Some(Arc::new(LogicalCodec::default()));
    config.override_physical_codec = Some(Arc::new(PhysicalCodec::default()));
    config.override_session_builder = Some(Arc::new(scheduler_state));
    // Executors ask for work: after an executor is lost, the stages to run again are taken up
    // by the others (pushed tasks were offered only when a job or an executor came, so such a
    // query waited for ever).
    config.scheduling_policy = ballista_core::config::TaskSchedulingPolicy::PullStaged;
    // A query whose executor dies is tried again elsewhere, a few times, then fails.
    config.task_max_failures = 2;
    config.stage_max_failures = 2;
    // An executor that stops sending heartbeats is given up after this long.
    config.executor_timeout_seconds = 10;
    config.expire_dead_executor_interval_seconds = 2;
    // When the last executor is lost, a running query fails once none has come back within
    // this long (Ballista's default, 180 s, left a client waiting for three minutes).
    config.no_executors_grace_period_seconds = config.executor_timeout_seconds;
    // Its own requests to executors present the secret too.
    config.override_create_grpc_client_endpoint = secret.as_ref().map(Secret::endpoint);
    let config = Arc::new(config);
    let sizes = (config.grpc_server_max_encoding_message_size, config.grpc_server_max_decoding_message_size);
    // Bind first, so that a port in use is an error naming it.
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| Error::Cluster(format!("scheduler: cannot listen on {bind}: {e}")))?;
    let cluster =
        BallistaCluster::new_from_config(&config).await.map_err(|e| Error::Cluster(format!("scheduler: {e}")))?;
    let scheduler = ballista_scheduler::scheduler_process::create_scheduler::<
        datafusion_proto::protobuf::LogicalPlanNode,
        datafusion_proto::protobuf::PhysicalPlanNode,
    >(cluster, config)
    .await
    .map_err(|e| Error::Cluster(format!("scheduler: {e}")))?;
    eprintln!(
        "{} {process}: listening; executors register with --scheduler {bind}, clients connect to df://{bind}",
        now()
    );
    tokio::select! {
        served = serve_scheduler(listener, scheduler, sizes, secret.as_ref(), &process) => served,
        _ = stop_signal() => {
            eprintln!("{} {process}: stopped", now());
            Ok(())
        }
    }
}

/// Serve the scheduler's gRPC service alone on `listener` (Ballista serves a REST API, health
/// routes and a Flight proxy beside it, which commdb uses none of and which would let anyone in
/// past the secret), behind the secret's gate when the cluster has one, noting what failed
/// jobs lost (`crate::losses`).
async fn serve_scheduler(
    listener: tokio::net::TcpListener,
    scheduler: ballista_scheduler::scheduler_server::SchedulerServer<
        datafusion_proto::protobuf::LogicalPlanNode,
        datafusion_proto::protobuf::PhysicalPlanNode,
    >,
    (encoding, decoding): (u32, u32),
    secret: Option<&Secret>,
    process: &str,
) -> crate::Result<()> {
    use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
    // A failed job's status names the executors it lost (crate::losses).
    let service = SchedulerGrpcServer::new(crate::losses::Noted::new(scheduler))
        .max_encoding_message_size(encoding as usize)
        .max_decoding_message_size(decoding as usize);
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let served = match secret {
        Some(secret) => {
            let gated = tonic::service::interceptor::InterceptedService::new(service, secret.gate(process));
            tonic::transport::Server::builder().add_service(gated).serve_with_incoming(incoming).await
        }
        None => tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming).await,
    };
    served.map_err(|e| Error::Cluster(format!("{process}: {e}")))
}

/// An executor's Arrow Flight service (its shuffle files, fetched by the other executors and
/// the client) behind the cluster's secret: Ballista's own service, gated.
fn gated_flight_service(
    gate: crate::secret::Gate,
    (encoding, decoding): (u32, u32),
) -> Arc<ballista_executor::ArrowFlightServerProvider> {
    Arc::new(move |work_dir, address, mut shutdown, grpc| {
        use arrow_flight::flight_service_server::FlightServiceServer;
        let service = FlightServiceServer::new(ballista_executor::flight_service::BallistaFlightService::new(work_dir))
            .max_encoding_message_size(encoding as usize)
            .max_decoding_message_size(decoding as usize);
        let service = tonic::service::interceptor::InterceptedService::new(service, gate.clone());
        tokio::spawn(async move {
            ballista_core::utils::create_grpc_server(&grpc)
                .add_service(service)
                .serve_with_shutdown(address, shutdown.recv())
                .await
                .map_err(ballista_core::error::BallistaError::TonicError)
        })
    })
}

/// Every task an executor is given, logged, then run as Ballista runs it.
struct LoggedTasks {
    process: String,
    inner: DefaultExecutionEngine,
}

/// The names of a plan's nodes, top down, commdb's analyses and scans included.
fn node_names(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<String>) {
    out.push(plan.name().to_string());
    for child in plan.children() {
        node_names(child, out);
    }
}

impl ExecutionEngine for LoggedTasks {
    fn create_query_stage_exec(
        &self,
        job_id: ballista_core::JobId,
        stage_id: usize,
        task_id: usize,
        global_output_partition_ids: Vec<usize>,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
        config: &SessionConfig,
    ) -> Result<Arc<dyn QueryStageExecutor>> {
        let mut names = Vec::new();
        node_names(&plan, &mut names);
        eprintln!(
            "{} {}: task {task_id} job {job_id} stage {stage_id} partitions {global_output_partition_ids:?}: {}",
            now(),
            self.process,
            names.join(" <- ")
        );
        if let Err(refused) = crate::guard::check_plan(&plan) {
            eprintln!("{} {}: task {task_id} job {job_id} refused: {refused}", now(), self.process);
            return Err(refused);
        }
        let plan = crate::retried::once_per_map_task(plan)?;
        self.inner.create_query_stage_exec(
            job_id,
            stage_id,
            task_id,
            global_output_partition_ids,
            plan,
            work_dir,
            config,
        )
    }
}

/// Run an executor until Ctrl-C or SIGTERM (or the scheduler tells it to stop).
pub async fn run_executor(options: ExecutorOptions) -> crate::Result<()> {
    let process = format!("executor {}", options.bind);
    install_log(&process);
    require_secret(&process, options.bind, options.secret.as_ref())?;
    keep_to(&process, options.bind, &options.data_dirs, options.work_dir.as_deref())?;
    let grpc_port = match options.grpc_port {
        Some(p) => p,
        None => options
            .bind
            .port()
            .checked_add(1)
            .ok_or_else(|| Error::Usage("executor: --bind's port is the last; give --grpc-port".into()))?,
    };
    // Both ports free, or an error naming the one in use.
    for port in [options.bind.port(), grpc_port] {
        let at = SocketAddr::new(options.bind.ip(), port);
        drop(
            std::net::TcpListener::bind(at)
                .map_err(|e| Error::Cluster(format!("executor: cannot listen on {at}: {e}")))?,
        );
    }
    // The scheduler answers, or an error naming it within 10 s.
    let reach = tokio::time::timeout(Duration::from_secs(10), tokio::net::TcpStream::connect(options.scheduler)).await;
    match reach {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            return Err(Error::Cluster(format!("executor: cannot reach the scheduler at {}: {e}", options.scheduler)));
        }
        Err(_) => {
            return Err(Error::Cluster(format!(
                "executor: the scheduler at {} did not answer within 10 s",
                options.scheduler
            )));
        }
    }
    // The scheduler lets this executor in, or an error saying why (it would otherwise ask for
    // tasks, refused, for ever).
    crate::secret::admitted(options.scheduler, options.secret.as_ref())
        .await
        .map_err(|e| Error::Cluster(format!("{process}: {e}")))?;
    let mut registry = BallistaFunctionRegistry::default();
    let state = commdb_state(SessionConfig::new())?;
    registry.scalar_functions.extend(state.scalar_functions().clone());
    registry.aggregate_functions.extend(state.aggregate_functions().clone());
    let mut config = ExecutorProcessConfig {
        bind_host: options.bind.ip().to_string(),
        external_host: Some(options.bind.ip().to_string()),
        port: options.bind.port(),
        grpc_port,
        scheduler_host: options.scheduler.ip().to_string(),
        scheduler_port: options.scheduler.port(),
        scheduler_connect_timeout_seconds: 10,
        vcores: options.vcores.unwrap_or(0),
        task_scheduling_policy: ballista_core::config::TaskSchedulingPolicy::PullStaged,
        work_dir: options.work_dir.as_ref().map(|d| d.to_string_lossy().into_owned()),
        memory_pool_size: options.memory_limit,
        executor_heartbeat_interval_seconds: 2,
        override_function_registry: Some(Arc::new(registry)),
        override_logical_codec: Some(Arc::new(LogicalCodec::default())),
        override_physical_codec: Some(Arc::new(PhysicalCodec::default())),
        override_execution_engine: Some(Arc::new(LoggedTasks {
            process: process.clone(),
            inner: DefaultExecutionEngine::new(),
        })),
        ..ExecutorProcessConfig::default()
    };
    if let Some(secret) = &options.secret {
        // Its requests to the scheduler, and its tasks' fetches of other executors' shuffle
        // files, present the secret; its own shuffle files are served only to who presents it.
        let endpoint = secret.endpoint();
        config.override_create_grpc_client_endpoint = Some(endpoint.clone());
        config.override_config_producer = Some(Arc::new(move || {
            SessionConfig::new_with_ballista().with_ballista_override_create_grpc_client_endpoint(endpoint.clone())
        }));
        let sizes = (config.grpc_max_encoding_message_size, config.grpc_max_decoding_message_size);
        config.override_arrow_flight_service = Some(gated_flight_service(secret.gate(&process), sizes));
    }
    eprintln!(
        "{} {process}: serving shuffles on {}, tasks on port {grpc_port}, registering with {}",
        now(),
        options.bind,
        options.scheduler
    );
    start_executor_process(Arc::new(config)).await.map_err(|e| Error::Cluster(format!("executor: {e}")))?;
    eprintln!("{} {process}: stopped", now());
    Ok(())
}
