//! Pictures as a person sees them: charts and the HTML report rendered by headless Chromium
//! (skipped, saying why, when it is not installed).

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::*;

/// Chromium when installed (Debian's `chromium`), else None with the reason printed.
fn chromium() -> Option<&'static str> {
    let found = Command::new("chromium").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if found.is_ok_and(|s| s.success()) {
        Some("chromium")
    } else {
        println!("skipped: chromium is not installed (apt-get install chromium), charts are not rendered");
        None
    }
}

/// Run headless Chromium on `file` with `args`, within a minute.
fn headless(browser: &str, file: &Path, args: &[&str]) -> Output {
    Command::new("timeout")
        .args([
            "60",
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
        ])
        .args(args)
        .arg(format!("file://{}", file.display()))
        .stdin(Stdio::null())
        .output()
        .expect("run chromium")
}

#[test]
fn charts_are_drawn_and_render_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let charts = [
        ("bars.svg", "SELECT region, sum(exclusive) / 1e6 AS ms FROM calls GROUP BY 1 ORDER BY 2 DESC"),
        (
            "lines.svg",
            "SELECT send_ts / 1000000 AS ms, avg(duration) AS mean_ns, max(duration) AS max_ns FROM messages GROUP BY 1",
        ),
        ("matrix.svg", "SELECT src, dst, sum(bytes) AS bytes FROM messages GROUP BY 1, 2"),
    ];
    for (file, sql) in charts {
        let path = dir.path().join(file);
        let o = run(&["--demo", "-c", sql, "--chart", path.to_str().unwrap()]);
        assert!(o.status.success(), "{file}: {}", stderr(&o));
        assert!(stderr(&o).contains("wrote a chart of"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty(), "the result is drawn, not printed: {}", stdout(&o));
    }
    let svg = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    assert_eq!(svg("bars.svg").matches("<polyline").count(), 0);
    assert_eq!(svg("lines.svg").matches("<polyline").count(), 2);
    assert!(svg("matrix.svg").contains("Each cell is one (src, dst) row"));
    // \chart in a script, and what it refuses.
    let script = dir.path().join("report.sql");
    std::fs::write(
        &script,
        format!("\\chart {}/ranks.svg SELECT rank, node_index FROM ranks;\n", dir.path().display()),
    )
    .unwrap();
    let o = run(&["--demo", "-f", script.to_str().unwrap()]);
    assert!(o.status.success() && dir.path().join("ranks.svg").exists(), "{}", stderr(&o));
    let o = run(&["--demo", "-c", "SELECT 1", "-c", "SELECT 2", "--chart", "x.svg"]);
    assert!(stderr(&o).contains("draws the result of one query"), "{}", stderr(&o));
    let o = run(&["--demo", "-c", "\\chart out.png SELECT 1, 2"]);
    assert!(stderr(&o).contains("give a file named *.svg"), "{}", stderr(&o));
    let o = run(&["--demo", "-c", "SELECT 'a' AS x, 'b' AS y", "--chart", dir.path().join("t.svg").to_str().unwrap()]);
    assert!(stderr(&o).contains("no numeric column"), "{}", stderr(&o));

    let Some(browser) = chromium() else { return };
    let blank = dir.path().join("blank.svg");
    std::fs::write(&blank, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"600\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/></svg>").unwrap();
    let shot = |file: &Path, png: &Path| {
        let o = headless(browser, file, &["--window-size=960,600", &format!("--screenshot={}", png.display())]);
        assert!(png.exists(), "{}: no screenshot: {}", file.display(), stderr(&o));
        std::fs::metadata(png).unwrap().len()
    };
    let blank_size = shot(&blank, &dir.path().join("blank.png"));
    for (file, _) in charts {
        let path = dir.path().join(file);
        // The browser reads the file as an SVG document: no parse error, and the drawing is there.
        let dom = stdout(&headless(browser, &path, &["--dump-dom"]));
        assert!(dom.contains("<svg") && !dom.contains("parsererror"), "{file}: {dom}");
        let size = shot(&path, &dir.path().join(format!("{file}.png")));
        assert!(
            size > 3 * blank_size,
            "{file}: the screenshot ({size} bytes) is close to a blank page's ({blank_size})"
        );
    }
}

/// A check run inside the browser on a copy of a report: every figure has a drawing of some
/// size with shapes in it. Its result is written on the body, which `--dump-dom` shows.
const FIGURE_CHECK: &str = "<script>(function(){var f=document.querySelectorAll('figure'),empty=[];\
for(var i=0;i<f.length;i++){var s=f[i].querySelector('svg'),b=s&&s.getBoundingClientRect();\
var shapes=s?s.querySelectorAll('path,rect,circle').length:0;\
if(!s||b.width<200||b.height<80||shapes<4){empty.push(f[i].querySelector('figcaption').textContent);}}\
document.body.setAttribute('data-figures',String(f.length));document.body.setAttribute('data-empty',empty.join('|'));})();</script>";

#[test]
fn the_report_names_the_injected_problem_and_renders_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("clean", "generate:ranks=64,ranks-per-node=16,iterations=60", "communication looks healthy"),
        (
            "mapping",
            "generate:ranks=64,ranks-per-node=16,iterations=60,bad-mapping",
            "caused by bad mapping of ranks to nodes.",
        ),
        (
            "background",
            "generate:ranks=64,ranks-per-node=16,iterations=120,background-traffic=4ms:8ms:5",
            "caused by background traffic on the network.",
        ),
        (
            "imbalance",
            "generate:ranks=64,ranks-per-node=16,iterations=60,imbalance=0-3:3",
            "caused by an unbalanced communication pattern.",
        ),
    ];
    for (name, trace, diagnosis) in cases {
        let path = dir.path().join(format!("{name}.html"));
        let o = run(&["report", trace, "-o", path.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("wrote a report of 10 figures"), "{name}: {}", stderr(&o));
        let page = std::fs::read_to_string(&path).unwrap();
        assert!(page.contains(diagnosis), "{name}: the report does not say '{diagnosis}'");
        for other in ["bad mapping of ranks", "background traffic on the network.", "unbalanced communication pattern."]
        {
            if !diagnosis.contains(other) {
                assert!(!page.contains(&format!("caused by {other}")), "{name}: the report also blames {other}");
            }
        }
        // Self-contained: nothing is fetched, no script runs.
        assert!(
            !page.contains("src=") && !page.contains("href=\"http") && !page.contains("url("),
            "{name}: refers to another file"
        );
        assert!(!page.contains("<script") && !page.contains("<link") && !page.contains("<img"), "{name}");
        assert_eq!(page.matches("<section").count(), 8, "{name}: eight sections");
        assert!(!page.contains("class=\"missing\""), "{name}: a section could not be made");
    }
    // In the shell, for the open trace; and what it refuses.
    let path = dir.path().join("shell.html");
    let o = run(&[SMALL, "-c", &format!("\\report {}", path.display())]);
    assert!(o.status.success() && path.exists(), "{}", stderr(&o));
    let o = run(&[SMALL, "-c", "\\report out.pdf"]);
    assert!(stderr(&o).contains("usage: \\report FILE.html"), "{}", stderr(&o));
    let o = run(&["-c", &format!("\\report {}", dir.path().join("none.html").display())]);
    assert!(stderr(&o).contains("no trace is open"), "{}", stderr(&o));

    let Some(browser) = chromium() else { return };
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let shot = |file: &Path, png: &Path| {
        let o = headless(browser, file, &["--window-size=1100,2400", &format!("--screenshot={}", png.display())]);
        assert!(png.exists(), "{}: no screenshot: {}", file.display(), stderr(&o));
        std::fs::metadata(png).unwrap().len()
    };
    let blank_size = shot(&blank, &dir.path().join("blank.png"));
    for (name, _, _) in cases {
        let page = std::fs::read_to_string(dir.path().join(format!("{name}.html"))).unwrap();
        let checked = dir.path().join(format!("{name}.checked.html"));
        std::fs::write(&checked, page.replace("</body>", &format!("{FIGURE_CHECK}</body>"))).unwrap();
        let o = headless(browser, &checked, &["--dump-dom", "--enable-logging=stderr", "--v=0"]);
        let dom = stdout(&o);
        assert!(dom.contains("data-figures=\"10\""), "{name}: the browser did not see 10 figures");
        assert!(
            dom.contains("data-empty=\"\""),
            "{name}: figures without a drawing: {}",
            dom.split("data-empty=").nth(1).unwrap_or("").chars().take(200).collect::<String>()
        );
        let log = stderr(&o);
        let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).collect();
        assert!(console.is_empty(), "{name}: the browser's console: {console:?}");
        let size = shot(&dir.path().join(format!("{name}.html")), &dir.path().join(format!("{name}.png")));
        assert!(
            size > 3 * blank_size,
            "{name}: the screenshot ({size} bytes) is close to a blank page's ({blank_size})"
        );
    }
}

#[test]
fn the_comparison_of_two_runs_names_the_planted_change_and_renders_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("diff.html");
    let before = "generate:ranks=16,ranks-per-node=4,iterations=40";
    let after = "generate:ranks=16,ranks-per-node=4,iterations=40,slow-rank=3:3:20,background-traffic=3ms:5ms:5";
    let o = run(&["report", before, "--vs", after, "-o", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("wrote a comparison of 3 figures"), "{}", stderr(&o));
    let page = std::fs::read_to_string(&path).unwrap();
    assert_eq!(page.matches("<section").count(), 4);
    assert!(!page.contains("class=\"missing\""), "a section could not be made");
    // The slower rank's computation is the first difference by rank; since iteration 20.
    assert!(page.contains("<tr><td>3</td><td>compute_ns</td>"), "rank 3's computation is not named first");
    assert!(page.contains("The first is iteration 20."), "the page does not say since when");
    assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("href=\"http"));
    // An option that does not apply is refused.
    let o = run(&["report", before, "--vs", "no/such/trace", "-o", dir.path().join("x.html").to_str().unwrap()]);
    assert!(!o.status.success() && stderr(&o).contains("no/such/trace"), "{}", stderr(&o));

    let Some(browser) = chromium() else { return };
    let checked = dir.path().join("diff.checked.html");
    std::fs::write(&checked, page.replace("</body>", &format!("{FIGURE_CHECK}</body>"))).unwrap();
    let o = headless(browser, &checked, &["--dump-dom", "--enable-logging=stderr", "--v=0"]);
    let dom = stdout(&o);
    assert!(dom.contains("data-figures=\"3\""), "the browser did not see 3 figures");
    assert!(dom.contains("data-empty=\"\""), "figures without a drawing");
    let console: Vec<String> =
        stderr(&o).lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).map(str::to_string).collect();
    assert!(console.is_empty(), "the browser's console: {console:?}");
    let png = dir.path().join("diff.png");
    headless(browser, &path, &["--window-size=1100,2600", &format!("--screenshot={}", png.display())]);
    assert!(std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0) > 50_000, "the screenshot is close to blank");
}

#[test]
fn the_report_draws_gpu_streams_under_their_rank() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpu.html");
    let o = run(&["report", "generate:ranks=8,iterations=10,gpu", "-o", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&path).unwrap();
    let timeline = page.split("id=\"timeline\"").nth(1).unwrap().split("</svg>").next().unwrap();
    // A row per stream below its rank, labelled by the stream, and the launches' arrows.
    assert_eq!(timeline.matches(">[0:7]</text>").count(), 8, "a row per stream, labelled by device and stream");
    assert!(timeline.contains("stroke=\"#882255\""), "no launch arrows");
    assert!(page.contains("(80 drawn)"), "one arrow per kernel of the 8 ranks' 10 steps");
    assert!(page.contains("its transfers between host and device (160)"));
    assert!(!page.contains("class=\"missing\""), "a section could not be made");
    // A trace without streams keeps one row per rank.
    let plain = dir.path().join("plain.html");
    assert!(run(&["report", "generate:ranks=8,iterations=10", "-o", plain.to_str().unwrap()]).status.success());
    let page = std::fs::read_to_string(&plain).unwrap();
    assert!(!page.contains("a row per GPU stream") && !page.contains(">[0:7]<"));

    let Some(browser) = chromium() else { return };
    let png = dir.path().join("gpu.png");
    let o = headless(browser, &path, &["--window-size=1100,2400", &format!("--screenshot={}", png.display())]);
    assert!(std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0) > 50_000, "blank: {}", stderr(&o));
    let o = headless(browser, &path, &["--dump-dom", "--enable-logging=stderr", "--v=0"]);
    let log = stderr(&o);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).collect();
    assert!(console.is_empty(), "the browser's console: {console:?}");
}
