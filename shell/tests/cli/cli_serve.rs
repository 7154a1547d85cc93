//! `commdb serve`: the server's answers checked against SQL run apart, bad input answered
//! with a message while the server keeps serving, and the page driven in headless Chromium
//! (zoom, pan, hover, click, overlays) with what it draws compared with SQL.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use serde_json::Value;

use super::browser::{self, Browser};
use crate::common::*;

/// A `commdb serve` process on a free port, stopped when dropped.
struct Served {
    child: Child,
    port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn start(args: &[&str]) -> Served {
        let mut child = commdb()
            .arg("serve")
            .args(args)
            .args(["--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start commdb serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line
            .split("http://127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("serve printed no URL: {line}"));
        Served { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// (status, body) of a request.
    fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(s, "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    }

    fn json(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.request("GET", path, "");
        (status, serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}")))
    }
}

/// The single value a query over the demo trace gives, as text.
fn sql_value(sql: &str) -> String {
    let o = run(&["--demo", "-q", "--format", "csv", "-c", sql]);
    assert!(o.status.success(), "{sql}: {}", stderr(&o));
    stdout(&o).lines().nth(1).unwrap_or_default().trim().to_string()
}

#[test]
fn serve_answers_views_like_the_lod_functions_and_refuses_bad_input_without_stopping() {
    let s = Served::start(&["--demo"]);
    let (status, run) = s.json("/api/trace");
    assert_eq!(status, 200, "{run}");
    let nodes = run["nodes"].as_array().unwrap().len();
    assert_eq!((run["ranks"].as_u64(), nodes), (Some(64), 4));
    let (_, whole) = s.json("/api/view?width=800");
    assert_eq!(whole["rows"].as_array().unwrap().len(), nodes, "a folded node is one row");
    assert!(whole["calls"].as_array().unwrap().iter().all(|c| c[0].as_u64().unwrap() < nodes as u64));

    // Every node opened: a row per rank, each slot's region as lod_calls gives it apart.
    let (a, b, w) = (5_000_000i64, 7_000_000i64, 400);
    let (_, v) = s.json(&format!("/api/view?t0={a}&t1={b}&width={w}&open=0,1,2,3"));
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 64);
    assert_eq!(v["resolution"], 5000);
    let calls = v["calls"].as_array().unwrap();
    for c in calls.iter().step_by(calls.len() / 12) {
        let rank = rows[c[0].as_u64().unwrap() as usize]["rank"].as_i64().unwrap();
        let t = c[1].as_i64().unwrap();
        let region = &v["regions"][c[3].as_u64().unwrap() as usize];
        let apart = sql_value(&format!(
            "SELECT region FROM lod_calls(t0 => {a}, t1 => {b}, pixels => {w}, per => 'rank') \
             WHERE rank = {rank} AND slot_start <= {t} AND slot_end > {t}"
        ));
        assert_eq!(region.as_str().unwrap(), apart, "rank {rank} at {t}");
    }
    let sent =
        sql_value(&format!("SELECT count(*) FROM messages WHERE send_ts >= {a} AND send_ts < {b} AND src <> dst"));
    assert_eq!(v["messages_in_window"].to_string(), sent);
    let lines: i64 = v["messages"].as_array().unwrap().iter().map(|m| m[4].as_i64().unwrap()).sum();
    assert_eq!(lines.to_string(), sent, "every merged line is sent when they are few");

    // Rows by communication region: a row per process_regions() region, each slot's region as
    // lod_calls(per => 'group') gives it apart with the regions as groups.
    let regions = sql_value("SELECT count(DISTINCT region) FROM process_regions()");
    let (status, by_region) = s.json(&format!("/api/view?t0={a}&t1={b}&width={w}&group=region"));
    assert_eq!(status, 200, "{by_region}");
    let rows = by_region["rows"].as_array().unwrap();
    assert_eq!(rows.len().to_string(), regions, "{by_region}");
    assert_eq!(rows.iter().map(|r| r["ranks"].as_u64().unwrap()).sum::<u64>(), 64);
    let calls = by_region["calls"].as_array().unwrap();
    for c in calls.iter().step_by((calls.len() / 8).max(1)) {
        let label = rows[c[0].as_u64().unwrap() as usize]["label"].as_str().unwrap();
        let region: i64 = label.trim_start_matches("region ").split(' ').next().unwrap().parse().unwrap();
        let t = c[1].as_i64().unwrap();
        let apart = sql_value(&format!(
            "SELECT region FROM lod_calls(rel => (SELECT c.rank, c.thread, c.region, c.start_ts, c.end_ts, \
             p.region AS grp FROM calls c JOIN process_regions() p ON c.rank = p.rank ORDER BY c.rank, c.start_ts), \
             t0 => {a}, t1 => {b}, pixels => {w}, per => 'group') \
             WHERE rank = {region} AND slot_start <= {t} AND slot_end > {t}"
        ));
        let drawn = &by_region["regions"][c[3].as_u64().unwrap() as usize];
        assert_eq!(drawn.as_str().unwrap(), apart, "{label} at {t}");
    }

    // The blamed windows: a band for each window attribution() gives a cause, as SQL apart.
    let (t0, t1) = (whole["t0"].as_i64().unwrap(), whole["t1"].as_i64().unwrap());
    let mut blamed = Value::Null;
    for _ in 0..600 {
        let (status, body) = s.json("/api/overlay?name=blamed&width=800");
        if status == 200 {
            blamed = body;
            break;
        }
        assert_eq!(status, 202, "{body}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let windows = sql_value(&format!(
        "SELECT count(*) FROM attribution() WHERE cause <> 'none' AND window_start < {t1} AND window_end > {t0}"
    ));
    assert_ne!(windows, "0", "the demo's background traffic is blamed");
    assert_eq!(blamed["bands"].as_array().unwrap().len().to_string(), windows, "{blamed}");
    let causes = sql_value("SELECT min(cause) FROM attribution() WHERE cause <> 'none'");
    assert!(blamed["labels"].as_array().unwrap().iter().any(|l| l.as_str().unwrap().starts_with(&causes)), "{blamed}");

    // Bad input: a message each, and the server still serves.
    for (path, expected) in [
        ("/api/view?group=rack", "group: expected node or region, got 'rack'"),
        ("/api/view?width=0", "width: expected 1 to 8192 pixels, got 0"),
        ("/api/view?width=10000000", "got 10000000"),
        ("/api/view?t0=900000000000&t1=900000001000", "outside the run"),
        ("/api/view?t0=20&t1=10", "is not after t0"),
        ("/api/view?t0=abc", "t0: expected a number, got 'abc'"),
        ("/api/view?open=99", "open: node 99 does not exist"),
        ("/api/view?open=x", "open: expected a comma-separated list"),
        ("/api/view?blocks=9", "blocks: block 9 does not exist"),
        ("/api/overlay?name=nothing", "overlay: expected critical_path, waits or blamed"),
        ("/api/stack?rank=1", "give rank and ts"),
        ("/nowhere", "no such page: /nowhere"),
    ] {
        let (status, body) = s.json(path);
        assert!((400..500).contains(&status), "{path}: {status}");
        assert!(body["error"].as_str().unwrap().contains(expected), "{path}: {body}");
    }
    let (status, body) = s.request("POST", "/api/query", "SELEC 1");
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.request("POST", "/api/query", "COPY (SELECT 1) TO '/tmp/commdb-serve-copy.csv'");
    assert_eq!(status, 400, "{body}");
    assert!(!std::path::Path::new("/tmp/commdb-serve-copy.csv").exists());
    let (status, body) =
        s.request("POST", "/api/query?t0=0&t1=1000000", "SELECT count(*) AS n FROM calls WHERE start_ts < $t1");
    assert_eq!(status, 200, "{body}");
    let q: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(q["rows"][0][0].to_string(), sql_value("SELECT count(*) FROM calls WHERE start_ts < 1000000"));

    // Twenty clients at once, each with its own window.
    let port = s.port;
    let clients: Vec<_> = (0..20)
        .map(|k| {
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
                let (t0, t1) = (k * 1_000_000, k * 1_000_000 + 3_000_000);
                write!(c, "GET /api/view?t0={t0}&t1={t1}&width=1000&open={} HTTP/1.1\r\n\r\n", k % 4).unwrap();
                let mut text = String::new();
                c.read_to_string(&mut text).unwrap();
                text.starts_with("HTTP/1.1 200")
            })
        })
        .collect();
    assert!(clients.into_iter().all(|c| c.join().unwrap()), "every client got its view");
    assert_eq!(s.json("/api/trace").0, 200);
}

#[test]
fn the_timeline_is_zoomed_panned_hovered_and_clicked_in_a_browser_as_sql_says() {
    if !browser::installed() {
        return;
    }
    let s = Served::start(&["--demo"]);
    let mut b = Browser::open(&s.url(), 1280, 900);
    b.wait_for("window.commdbTimeline && commdbTimeline.state().drawn >= 1", 30);
    let state = b.eval("commdbTimeline.state()");
    assert_eq!(state["rows"], 4, "{state}");
    let geo = state["geometry"].clone();
    let row_h = geo["rowH"].as_f64().unwrap();
    // Canvas coordinates: the header above it.
    let top = b.eval("document.getElementById('timeline').getBoundingClientRect().top").as_f64().unwrap();
    let row_y = |row: f64| top + 22.0 + 14.0 + (row + 0.5) * row_h;

    // Open node 0 by its label: a row per rank of it.
    b.mouse("mousePressed", 40.0, row_y(0.0), serde_json::json!({ "button": "left", "clickCount": 1 }));
    b.mouse("mouseReleased", 40.0, row_y(0.0), serde_json::json!({ "button": "left", "clickCount": 1 }));
    b.wait_for("commdbTimeline.state().rows === 19 && commdbTimeline.state().drawn >= 2", 30);
    let row_h = b.eval("commdbTimeline.state().geometry.rowH").as_f64().unwrap();
    let row_y = |row: f64| top + 22.0 + 14.0 + (row + 0.5) * row_h;

    // Zoom in three notches about the middle, then pan by dragging to the left.
    let before = b.eval("commdbTimeline.state()");
    for _ in 0..3 {
        b.mouse("mouseWheel", 700.0, row_y(2.0), serde_json::json!({ "deltaX": 0, "deltaY": -100 }));
    }
    b.wait_for(
        &format!(
            "commdbTimeline.state().drawn >= {} && !commdbTimeline.state().loading",
            before["drawn"].as_u64().unwrap() + 1
        ),
        30,
    );
    let zoomed = b.eval("commdbTimeline.state()");
    let span = |s: &Value| s["t1"].as_f64().unwrap() - s["t0"].as_f64().unwrap();
    assert!(span(&zoomed) < 0.6 * span(&before), "zoomed in: {zoomed} after {before}");
    b.mouse("mousePressed", 800.0, row_y(3.0), serde_json::json!({ "button": "left", "clickCount": 1 }));
    b.mouse("mouseMoved", 700.0, row_y(3.0), serde_json::json!({ "button": "left", "buttons": 1 }));
    b.mouse("mouseMoved", 600.0, row_y(3.0), serde_json::json!({ "button": "left", "buttons": 1 }));
    b.mouse("mouseReleased", 600.0, row_y(3.0), serde_json::json!({ "button": "left", "clickCount": 1 }));
    b.wait_for(
        &format!(
            "commdbTimeline.state().drawn >= {} && !commdbTimeline.state().loading",
            zoomed["drawn"].as_u64().unwrap() + 1
        ),
        30,
    );
    let panned = b.eval("commdbTimeline.state()");
    assert!(panned["t0"].as_f64().unwrap() > zoomed["t0"].as_f64().unwrap(), "dragging left moves later: {panned}");

    // Hover a rank's row: the region under the cursor is lod_calls' for that slot, apart.
    b.mouse("mouseMoved", 640.0, row_y(5.0), serde_json::json!({}));
    let hover = b.eval("commdbTimeline.state().hover");
    assert_eq!(hover["kind"], "cell", "{hover}");
    let view = b.eval("commdbTimeline.state()");
    let rank = b.eval("commdbTimeline.view().rows[5].rank");
    let (a, z, w) = (&view["viewT0"], &view["viewT1"], b.eval("commdbTimeline.view().width"));
    let t = hover["slot_start"].as_i64().expect("a call under the cursor");
    let apart = sql_value(&format!(
        "SELECT region FROM lod_calls(t0 => {a}, t1 => {z}, pixels => {w}, per => 'rank') \
         WHERE rank = {rank} AND slot_start <= {t} AND slot_end > {t}"
    ));
    assert_eq!(hover["region"].as_str().unwrap(), apart, "{hover}");
    b.wait_for("!!commdbTimeline.state().hover.path", 10);

    // The message lines: the window's messages between different rows (node 0's ranks each a
    // row, the other nodes one row each), the busiest drawn when there are many.
    let in_window = b.eval("commdbTimeline.view().messages_in_window");
    let apart = sql_value(&format!(
        "SELECT count(*) FROM messages m JOIN ranks s ON m.src = s.rank JOIN ranks d ON m.dst = d.rank \
         WHERE m.send_ts >= {a} AND m.send_ts < {z} \
         AND (CASE WHEN s.node_index = 0 THEN m.src ELSE -1 - s.node_index END) \
          <> (CASE WHEN d.node_index = 0 THEN m.dst ELSE -1 - d.node_index END)"
    ));
    assert_eq!(in_window.to_string(), apart);
    let (drawn, merged) =
        (b.eval("commdbTimeline.view().messages.length"), b.eval("commdbTimeline.view().message_rows"));
    assert_eq!(drawn.as_u64().unwrap(), merged.as_u64().unwrap().min(4000), "the busiest 4000 lines at most");
    assert_eq!(b.eval("commdbTimeline.state().lines"), drawn);

    // The critical path overlay, and a click: the call's waits and whether it is on the path.
    b.eval("document.getElementById('ov-critical_path').click(), true");
    b.wait_for("commdbTimeline.state().overlays.critical_path > 0", 60);
    let on_path_rows = b.eval("commdbTimeline.state().overlays.critical_path");
    let path_apart = sql_value(&format!("SELECT count(*) FROM critical_path() WHERE start_ts < {z} AND end_ts > {a}"));
    assert!(path_apart.parse::<u64>().unwrap() > 0 && on_path_rows.as_u64().unwrap() > 0);
    // The blamed windows: a band for each window attribution() gives a cause, as apart.
    b.eval("document.getElementById('ov-blamed').click(), true");
    b.wait_for("commdbTimeline.state().overlays.blamed !== undefined", 60);
    let bands = b.eval("commdbTimeline.state().overlays.blamed");
    let blamed_apart = sql_value(&format!(
        "SELECT count(*) FROM attribution() WHERE cause <> 'none' AND window_start < {z} AND window_end > {a}"
    ));
    assert_eq!(bands.to_string(), blamed_apart);
    let click = |b: &mut Browser| {
        b.mouse("mousePressed", 640.0, row_y(5.0), serde_json::json!({ "button": "left", "clickCount": 1 }));
        b.mouse("mouseReleased", 640.0, row_y(5.0), serde_json::json!({ "button": "left", "clickCount": 1 }));
    };
    click(&mut b);
    b.wait_for("!!commdbTimeline.state().selected", 20);
    for _ in 0..100 {
        if b.eval("commdbTimeline.state().selected.analyses") == "ready" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        b.eval("commdbTimeline.state().selected = null, true");
        click(&mut b);
        b.wait_for("!!commdbTimeline.state().selected", 20);
    }
    let selected = b.eval("commdbTimeline.state().selected");
    assert_eq!(selected["analyses"], "ready", "{selected}");
    let inner = selected["stack"].as_array().unwrap().last().cloned().expect("a call under the click");
    let (start, end) = (&inner[1], &inner[2]);
    let on_path = sql_value(&format!(
        "SELECT count(*) > 0 FROM critical_path() WHERE rank = {rank} AND thread = 0 AND start_ts < {end} AND end_ts > {start}"
    ));
    assert_eq!(selected["on_critical_path"].to_string(), on_path, "{selected}");
    let waits = sql_value(&format!(
        "SELECT count(*) FROM wait_states() WHERE rank = {rank} AND thread = 0 AND ts < {end} AND ts + wait_ns > {start}"
    ));
    assert_eq!(selected["waits"].as_array().unwrap().len().to_string(), waits, "{selected}");

    // The query box, with the window as $t0 and $t1.
    b.eval("document.querySelector('[data-pane=query]').click(), document.getElementById('run').click(), true");
    b.wait_for("document.querySelector('#result table') !== null", 30);

    let png = b.screenshot();
    assert!(png.len() > 20_000, "the screenshot is {} bytes", png.len());
    if let Ok(dir) = std::env::var("COMMDB_SCREENSHOTS") {
        std::fs::write(std::path::Path::new(&dir).join("serve-timeline.png"), &png).unwrap();
    }
    let errors = b.eval("commdbTimeline.state().errors");
    assert_eq!(errors, serde_json::json!([]), "the page reported errors");
    assert!(b.errors.is_empty(), "console errors: {:?}", b.errors);
}

#[test]
fn a_store_removed_under_the_page_gives_the_views_that_read_it_a_message_and_the_server_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("run.store");
    let o = run(&["generate", store.to_str().unwrap(), "--ranks", "16", "--iterations", "200"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = Served::start(&[store.to_str().unwrap()]);
    // The whole run's view waits for the overview, which is then made.
    let whole = s.json("/api/view?width=600");
    assert_eq!(whole.0, 200, "{}", whole.1);
    assert_eq!(whole.1["overview_rows"], 4, "{}", whole.1);
    let (_, trace) = s.json("/api/trace");
    let (t0, t1) = (trace["t0"].as_i64().unwrap(), trace["t1"].as_i64().unwrap());
    std::fs::remove_dir_all(&store).unwrap();

    // A narrow window reads the calls: a message that names the store, for each such view.
    let mid = t0 + (t1 - t0) / 2;
    for k in 0..3 {
        let narrow = format!("/api/view?t0={}&t1={}&width=1000", mid + k * 5000, mid + k * 5000 + 2000);
        let (status, body) = s.json(&narrow);
        assert_eq!(status, 500, "{narrow}: {body}");
        assert!(body["error"].as_str().unwrap().contains("run.store"), "{narrow}: {body}");
    }
    let (status, body) = s.json(&format!("/api/stack?rank=0&ts={mid}"));
    assert_eq!(status, 500, "{body}");
    // What was made before is served still: the views kept, and wide views from the overview.
    assert_eq!(s.json("/api/view?width=600"), whole);
    let (status, wide) = s.json(&format!("/api/view?t0={t0}&t1={mid}&width=300"));
    assert_eq!(status, 200, "{wide}");
    assert!(!wide["calls"].as_array().unwrap().is_empty());
    assert_eq!(s.json("/api/trace").0, 200);
}
