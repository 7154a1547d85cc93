//! `commdb serve TRACE...`: a zoomable timeline in the browser. The page (HTML, JavaScript and
//! CSS in `page/`, embedded in the binary) asks for the visible window at its own width, and
//! every view is a query: commdb's level-of-detail functions over that window (`views`), with
//! rows grouped by node (`layout`), and the critical path and wait states as overlays
//! (`overlays`). The folded rows of wide views come from an overview of the calls made once as
//! the server starts (`summary`); the rows it does not have are read in tiles of the slot grid,
//! kept so that a pan reads only what it uncovers (`tiles`). Views are cached per (window,
//! width, rows) and a query whose client went away is dropped. Beside the timeline a query box runs read-only SQL with the selected window as
//! parameters `$t0` and `$t1`. The server is a small HTTP/1.1 one (`http`) on 127.0.0.1 unless
//! asked otherwise.

mod http;
mod layout;
mod overlays;
mod rows_udf;
mod summary;
mod table_json;
mod tiles;
mod views;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use datafusion::prelude::SessionContext;
use serde_json::json;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::error::{Result, ShellError};
use http::{Request, Response};
use views::{Facts, ViewRequest};

/// Views kept in the cache (the oldest is dropped first).
const CACHED_VIEWS: usize = 256;
/// Rows of a query box's result sent to the page.
const QUERY_ROWS: usize = 1000;

/// The page, its script and style put together.
fn page(facts: &Facts) -> String {
    include_str!("page/index.html")
        .replace("/*STYLE*/", include_str!("page/timeline.css"))
        .replace("/*SCRIPT*/", include_str!("page/timeline.js"))
        .replace("TRACE_NAME", &html_escape(&facts.name))
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// What every connection shares.
struct Server {
    ctx: SessionContext,
    /// The page, put together once.
    page: Response,
    /// The session, for the report (which plans its queries through it).
    session: tokio::sync::Mutex<commdb_catalog::session::Session>,
    report: tokio::sync::Mutex<Option<Response>>,
    /// The rows by node (made as the server starts), the trace's facts.
    facts: Facts,
    by_node: Arc<Grouped>,
    /// The rows by communication region, made on first demand.
    by_region: tokio::sync::OnceCell<Result<Arc<Grouped>, String>>,
    cache: Mutex<Cache>,
    /// The tiles of the rows views read.
    tiles: tiles::Tiles,
    /// Views being computed ahead of the page (the whole run at the usual widths).
    warming: Mutex<HashMap<Arc<str>, Warming>>,
    overlays: overlays::Overlays,
}

/// The rows of one grouping and their overview.
struct Grouped {
    facts: Facts,
    /// The overview, made in the background (None: it failed, and every view reads the calls).
    summary: Overview,
    /// Its finest slot width: a view as fine waits for it rather than reading the calls.
    summary_finest: i64,
}

impl Grouped {
    fn new(ctx: &SessionContext, facts: Facts) -> Grouped {
        let (summary, summary_finest) = overview(ctx, &facts);
        Grouped { facts, summary, summary_finest }
    }
}

impl Server {
    /// The rows and overview of `grouping` (by region: the regions found and the overview
    /// started on first demand).
    async fn grouped(&self, grouping: views::Grouping) -> Result<Arc<Grouped>, String> {
        match grouping {
            views::Grouping::Node => Ok(self.by_node.clone()),
            views::Grouping::Region => self
                .by_region
                .get_or_init(|| async {
                    let facts = views::by_region(&self.ctx, &self.facts).await?;
                    Ok(Arc::new(Grouped::new(&self.ctx, facts)))
                })
                .await
                .clone(),
        }
    }
}

/// The overview being made, which the views that can use it wait for.
type Overview = futures::future::Shared<futures::future::BoxFuture<'static, Option<Arc<summary::Summary>>>>;

/// Views computed, by key, and their keys oldest first.
type Cache = (HashMap<Arc<str>, Response>, VecDeque<Arc<str>>);

/// A view computed ahead, which a request for it waits for.
type Warming = futures::future::Shared<futures::future::BoxFuture<'static, Response>>;

/// Widths whose whole-run view is computed as the server starts, one after the other: the
/// slot widths of screens from 1,000 to 2,500 pixels wide, the most common first (a 1,920-pixel
/// screen, then 1,280 and 2,560).
const WARM_WIDTHS: [i64; 4] = [1740, 1100, 2380, 1300];

/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a running answer looks whether its client went away.
const CLIENT_CHECK: Duration = Duration::from_millis(25);

/// Serve the session's default trace on `bind` until Ctrl-C. Connections are taken on threads
/// of their own (blocking I/O: a connection is one short request); the answers are computed on
/// the query runtime this runs on.
pub async fn serve(session: commdb_catalog::session::Session, bind: SocketAddr) -> Result<()> {
    let ctx = session.context().clone();
    let facts = views::facts(&ctx).await.map_err(ShellError::Runtime)?;
    let listener =
        TcpListener::bind(bind).map_err(|e| ShellError::Runtime(format!("serve: cannot listen on {bind}: {e}")))?;
    let at = listener.local_addr().map_err(|e| ShellError::Runtime(format!("serve: {e}")))?;
    let by_node = Arc::new(Grouped::new(&ctx, facts.clone()));
    let server = Arc::new(Server {
        ctx,
        page: Response::page(page(&facts)),
        session: tokio::sync::Mutex::new(session),
        report: tokio::sync::Mutex::new(None),
        facts,
        by_node,
        by_region: tokio::sync::OnceCell::new(),
        cache: Mutex::new((HashMap::new(), VecDeque::new())),
        tiles: tiles::Tiles::default(),
        warming: Mutex::new(HashMap::new()),
        overlays: overlays::Overlays::default(),
    });
    warm(&server);
    println!("serving {} ({} ranks) at http://{at}/  (Ctrl-C stops)", server.facts.name, server.facts.ranks);
    let runtime = tokio::runtime::Handle::current();
    std::thread::Builder::new()
        .name("commdb-serve".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let (server, runtime) = (server.clone(), runtime.clone());
                let _ = std::thread::Builder::new()
                    .name("commdb-connection".into())
                    .spawn(move || connection(&server, &runtime, stream));
            }
        })
        .map_err(|e| ShellError::Runtime(format!("serve: cannot start the server's thread: {e}")))?;
    let _ = tokio::signal::ctrl_c().await;
    eprintln!("serve: stopped");
    Ok(())
}

/// Answer one request, dropping its work if the client closes the connection first (the page
/// cancels the views it no longer needs).
fn connection(server: &Arc<Server>, runtime: &tokio::runtime::Handle, mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let request = match http::read_request(&mut stream) {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(response) => return http::write_response(&mut stream, &response),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let shared = server.clone();
    let task = runtime.spawn(async move {
        let _ = tx.send(answer(&shared, &request).await);
    });
    loop {
        match rx.recv_timeout(CLIENT_CHECK) {
            Ok(response) => return http::write_response(&mut stream, &response),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return http::write_response(&mut stream, &Response::error(500, "the answer failed"));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                // The client sends nothing after its request: a read that ends is a close.
                let _ = stream.set_nonblocking(true);
                let mut probe = [0u8; 1];
                let gone = matches!(stream.peek(&mut probe), Ok(0));
                let _ = stream.set_nonblocking(false);
                if gone {
                    task.abort();
                    return;
                }
            }
        }
    }
}

/// The response to `request`.
async fn answer(server: &Server, request: &Request) -> Response {
    let get = |name: &str| request.param(name).map(str::to_string);
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/") => server.page.clone(),
        ("GET", "/api/trace") => {
            let f = &server.facts;
            let body = json!({
                "name": f.name, "t0": f.t0, "t1": f.t1, "ranks": f.ranks,
                "nodes": f.layout.nodes, "locations": f.layout.locations,
            });
            Response::json(Arc::new(body.to_string().into_bytes()))
        }
        ("GET", "/api/view") => {
            let grouped = match grouped(server, get("group")).await {
                Ok(g) => g,
                Err(response) => return response,
            };
            match ViewRequest::parse(&get, &grouped.facts) {
                Err(e) => Response::error(400, &e),
                Ok(req) => view(server, &grouped, &req).await,
            }
        }
        ("GET", "/api/stack") => {
            let number = |name: &str| get(name).and_then(|v| v.parse::<i64>().ok());
            match (number("rank"), number("ts")) {
                (Some(rank), Some(ts)) => {
                    stack(server, rank, number("thread").unwrap_or(0), ts, get("analyses").is_some()).await
                }
                _ => Response::error(400, "stack: give rank and ts as integers (and thread)"),
            }
        }
        ("GET", "/api/report") => report(server).await,
        ("GET", "/api/overlay") => match grouped(server, get("group")).await {
            Ok(g) => overlay(server, &g, &get),
            Err(response) => response,
        },
        ("POST", "/api/query") => query(server, request).await,
        ("GET", _) | ("POST", _) => Response::error(404, &format!("no such page: {}", request.path)),
        (method, _) => Response::error(405, &format!("{method} is not served; GET the page")),
    }
}

/// The grouping a request asks for (`group=node` or `group=region`), its rows made if needed.
async fn grouped(server: &Server, group: Option<String>) -> Result<Arc<Grouped>, Response> {
    let grouping = views::Grouping::parse(group.as_deref()).map_err(|e| Response::error(400, &e))?;
    server
        .grouped(grouping)
        .await
        .map_err(|e| Response::error(500, &format!("the rows by communication region failed: {e}")))
}

/// The call stack at a time on a rank's thread; with `analyses`, the wait states in its
/// innermost call and whether that call is on the critical path (once both are computed).
async fn stack(server: &Server, rank: i64, thread: i64, ts: i64, analyses: bool) -> Response {
    let mut v = match views::stack_at(&server.ctx, rank, thread, ts).await {
        Ok(v) => v,
        Err(e) => return Response::error(500, &e),
    };
    if analyses {
        let waits = server.overlays.get(&server.ctx, overlays::Overlay::Waits);
        let path = server.overlays.get(&server.ctx, overlays::Overlay::CriticalPath);
        let inner = v["stack"].as_array().and_then(|s| s.last()).cloned();
        let (a, b) = match &inner {
            Some(call) => (call[1].as_i64().unwrap_or(ts), call[2].as_i64().unwrap_or(ts + 1)),
            None => (ts, ts + 1),
        };
        match (waits, path) {
            (overlays::State::Failed(e), _) | (_, overlays::State::Failed(e)) => {
                return Response::error(500, &format!("the analysis failed: {e}"));
            }
            (overlays::State::Ready(w), overlays::State::Ready(p)) => {
                let on_path = p.overlapping(rank, thread, a, b);
                v["analyses"] = json!("ready");
                v["on_critical_path"] = json!(!on_path.is_empty());
                v["critical_path"] = json!(on_path);
                v["waits"] = json!(w.overlapping(rank, thread, a, b));
            }
            _ => v["analyses"] = json!("running"),
        }
    }
    Response::json(Arc::new(v.to_string().into_bytes()))
}

/// The HTML report of the trace, made once on first demand.
async fn report(server: &Server) -> Response {
    let mut made = server.report.lock().await;
    if let Some(page) = &*made {
        return page.clone();
    }
    let mut session = server.session.lock().await;
    match commdb_report::html(&mut session).await {
        Ok((page, _)) => {
            let page = Response::page(page);
            *made = Some(page.clone());
            page
        }
        Err(e) => Response::error(500, &format!("the report failed: {e}")),
    }
}

/// Start making the calls' overview; the shared answer and its finest slot width.
fn overview(ctx: &SessionContext, facts: &Facts) -> (Overview, i64) {
    let rows = facts.layout.rows(&layout::Opened::default()).0.len() as i64;
    let budget = summary::budget(facts.calls);
    let finest = summary::finest_width(facts.t0, facts.t1, rows, budget);
    let (ctx, facts) = (ctx.clone(), facts.clone());
    let work: futures::future::BoxFuture<'static, Option<Arc<summary::Summary>>> = Box::pin(async move {
        let started = std::time::Instant::now();
        match summary::Summary::build(&ctx, &facts, budget, summary::LINES).await {
            Ok(s) => {
                eprintln!("serve: the overview is made in {:.1} s ({})", started.elapsed().as_secs_f64(), s.describe());
                Some(Arc::new(s))
            }
            Err(e) => {
                eprintln!("serve: the calls' overview failed, every view reads the calls: {e}");
                None
            }
        }
    });
    let shared = futures::FutureExt::shared(work);
    tokio::spawn(shared.clone());
    (shared, finest)
}

/// Compute the whole run's view at the usual widths ahead of the page, one after the other, then
/// a narrow one.
fn warm(server: &Arc<Server>) {
    let (f, mut keys) = (&server.facts, Vec::new());
    // Then a thousandth of the run in the middle, finer than the overview's slots: the first
    // view that reads the calls and messages of a window loads their files' page indexes.
    let (middle, narrow) = (f.t0 + (f.t1 - f.t0) / 2, ((f.t1 - f.t0) / 1000).max(1));
    let windows =
        WARM_WIDTHS.map(|width| (f.t0, f.t1, width)).into_iter().chain([(middle, middle + narrow, WARM_WIDTHS[0])]);
    for (t0, t1, width) in windows {
        let req = ViewRequest::snapped(t0, t1, width, layout::Opened::default());
        let key = views::cache_key(&req, f.grouping);
        if keys.iter().any(|(k, _)| k == &key) {
            continue;
        }
        keys.push((key, req));
    }
    let mut previous: Option<Warming> = None;
    for (key, req) in keys {
        let (shared, after) = (server.clone(), previous.take());
        let work: futures::future::BoxFuture<'static, Response> = Box::pin(async move {
            if let Some(before) = after {
                before.await;
            }
            compute_view(&shared.by_node, &shared.ctx, &req, &shared.tiles).await
        });
        let work = futures::FutureExt::shared(work);
        lock(&server.warming).insert(key.clone(), work.clone());
        let (shared, done) = (server.clone(), work.clone());
        tokio::spawn(async move {
            let response = done.await;
            if response.status == 200 {
                remember(&shared, key.clone(), response);
            }
            lock(&shared.warming).remove(&key);
        });
        previous = Some(work);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Keep a computed view (the oldest is dropped past `CACHED_VIEWS`).
fn remember(server: &Server, key: Arc<str>, response: Response) {
    let mut cache = lock(&server.cache);
    let (map, order) = &mut *cache;
    if map.insert(key.clone(), response).is_none() {
        order.push_back(key);
    }
    while order.len() > CACHED_VIEWS {
        if let Some(old) = order.pop_front() {
            map.remove(&old);
        }
    }
}

async fn compute_view(grouped: &Grouped, ctx: &SessionContext, req: &ViewRequest, tiles: &tiles::Tiles) -> Response {
    // A view as wide as the overview's slots waits for it; a finer one takes it if made.
    let summary = if req.res >= grouped.summary_finest {
        grouped.summary.clone().await
    } else {
        grouped.summary.peek().cloned().flatten()
    };
    let latency = summary.as_ref().is_some_and(|s| s.latency);
    match views::view(ctx, &grouped.facts, req, summary.as_deref(), latency, tiles).await {
        Err(e) => Response::error(500, &format!("the view failed: {e}")),
        Ok(v) => Response::json(Arc::new(v.to_string().into_bytes())),
    }
}

/// A view: from the cache when it was computed before, from the warming when it is being
/// computed ahead, else computed now.
async fn view(server: &Server, grouped: &Grouped, req: &ViewRequest) -> Response {
    let key = views::cache_key(req, grouped.facts.grouping);
    if let Some(hit) = lock(&server.cache).0.get(&key) {
        return hit.clone();
    }
    let warming = lock(&server.warming).get(&key).cloned();
    if let Some(w) = warming {
        return w.await;
    }
    let response = compute_view(grouped, &server.ctx, req, &server.tiles).await;
    if response.status == 200 {
        remember(server, key, response.clone());
    }
    response
}

/// An overlay's stretches in a window, or that it is still being computed (202 and the page
/// asks again).
fn overlay(server: &Server, grouped: &Grouped, get: &dyn Fn(&str) -> Option<String>) -> Response {
    let which = match overlays::Overlay::parse(get("name").as_deref().unwrap_or("")) {
        Ok(w) => w,
        Err(e) => return Response::error(400, &e),
    };
    let req = match ViewRequest::parse(get, &grouped.facts) {
        Ok(r) => r,
        Err(e) => return Response::error(400, &e),
    };
    match server.overlays.get(&server.ctx, which) {
        overlays::State::Running => {
            let mut r = Response::json(Arc::new(json!({ "running": true }).to_string().into_bytes()));
            r.status = 202;
            r
        }
        overlays::State::Failed(e) => Response::error(500, &format!("the analysis failed: {e}")),
        overlays::State::Ready(s) => {
            let (_, keys) = grouped.facts.layout.rows(&req.opened);
            let split = grouped.facts.layout.split_ranks(&req.opened);
            let v = overlays::window(&s, &keys, &split, req.t0, req.t1, req.width);
            Response::json(Arc::new(v.to_string().into_bytes()))
        }
    }
}

/// The query box: one read-only statement, `$t0` and `$t1` bound to the selected window.
async fn query(server: &Server, request: &Request) -> Response {
    let sql = request.body.trim();
    if sql.is_empty() {
        return Response::error(400, "the query is empty");
    }
    let bound = |name: &str, default: i64| request.param(name).and_then(|v| v.parse::<i64>().ok()).unwrap_or(default);
    let params = datafusion::common::ParamValues::Map(
        [
            ("t0".to_string(), datafusion::scalar::ScalarValue::Int64(Some(bound("t0", server.facts.t0))).into()),
            ("t1".to_string(), datafusion::scalar::ScalarValue::Int64(Some(bound("t1", server.facts.t1))).into()),
        ]
        .into(),
    );
    let options = datafusion::execution::context::SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let started = std::time::Instant::now();
    let result = async {
        let df = server.ctx.sql_with_options(sql, options).await?;
        let df = if sql.contains('$') { df.with_param_values(params)? } else { df };
        let schema = df.schema().as_arrow().clone();
        let batches = df.collect().await?;
        Ok::<_, datafusion::error::DataFusionError>((schema, batches))
    }
    .await;
    match result {
        Err(e) => Response::error(400, &crate::error::ShellError::from(e).to_string()),
        Ok((schema, batches)) => {
            let mut table = table_json::table(&schema, &batches, QUERY_ROWS);
            table["elapsed_ms"] = json!(started.elapsed().as_millis() as u64);
            let title = sql.lines().next().unwrap_or_default();
            if let Ok(svg) = commdb_report::chart::svg(&Arc::new(schema), &batches, title) {
                table["chart"] = json!(svg);
            }
            Response::json(Arc::new(table.to_string().into_bytes()))
        }
    }
}
