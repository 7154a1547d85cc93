"""What Jupyter shows: the trace's card with its warnings, results as escaped HTML tables that
say how many rows they leave out, the report inline and charts as SVG."""

import re

import commdb


def test_a_result_escapes_what_it_shows(demo):
    html = demo.sql("SELECT '<script>alert(1)</script>' AS \"<b>col</b>\", 'a & b' AS amp")._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "&lt;b&gt;col&lt;/b&gt;" in html
    assert "a &amp; b" in html


def test_a_long_result_says_what_it_leaves_out(demo):
    r = demo.sql("SELECT * FROM messages")
    html = r._repr_html_()
    assert html.count("<tr>") == 21  # the header and 20 rows
    assert "44780 more rows not shown (44800 in all)" in html
    text = repr(r)
    assert "44780 more rows not shown" in text
    short = demo.sql("SELECT 1 AS one")
    assert "not shown" not in short._repr_html_() and "1 rows" in short._repr_html_()


def test_long_values_are_cut(demo):
    html = demo.sql("SELECT repeat('x', 500) AS long")._repr_html_()
    assert "x" * 79 + "…" in html and "x" * 81 not in html


def test_the_trace_card(demo, repo, tmp_path):
    card = demo._repr_html_()
    for fact in ["ranks", "64", "events", "rows in messages", "44,800"]:
        assert fact in card
    assert "Warnings" not in card
    trace_file = tmp_path / "three<ranks>.csv"
    trace_file.write_bytes((repo / "tests" / "data" / "three_ranks.csv").read_bytes())
    import pytest

    with commdb.open(trace_file) as t:
        with pytest.warns(commdb.Warning, match=r"unmatched_send \(1\)"):
            t.sql("SELECT count(*) FROM messages")
        card = t._repr_html_()
        assert "Warnings" in card and "unmatched_send" in card
        assert "three&lt;ranks&gt;" in card and "three<ranks>" not in card
        assert t.warnings[0][0] == "unmatched_send"
    assert "demo: 64 ranks" in repr(demo)


def test_the_report_inline(demo, tmp_path):
    report = demo.report()
    page = report.html
    assert page.startswith("<!DOCTYPE html>") and "Who communicates with whom" in page
    inline = report._repr_html_()
    assert inline.startswith("<iframe") and "srcdoc=" in inline
    assert "<svg" not in inline  # the page is escaped into the frame's srcdoc
    report.save(tmp_path / "report.html")
    assert (tmp_path / "report.html").read_text() == page


def test_charts(demo):
    line = demo.chart(
        "SELECT send_ts / 1000000 AS ms, avg(duration) AS mean_ns FROM messages GROUP BY 1 ORDER BY 1", kind="line"
    )
    assert line._repr_svg_() == line.svg and line.svg.startswith("<svg")
    bars = demo.chart("SELECT node, count(*) AS ranks FROM ranks GROUP BY 1 ORDER BY 1", kind="bar")
    assert len(re.findall("<rect", bars.svg)) >= 4 and bars.svg != line.svg
    heat = demo.chart("SELECT src, dst, bytes FROM comm_matrix()", kind="heatmap")
    # Left to choose, a grid of (x, y, value) rows is drawn as a heatmap too.
    assert demo.chart("SELECT src, dst, bytes FROM comm_matrix()").svg == heat.svg
    assert demo.chart("SELECT src, dst, bytes FROM comm_matrix()", kind="line").svg != heat.svg


def test_importing_commdb_imports_nothing_heavy():
    import subprocess
    import sys

    heavy = "('matplotlib', 'bokeh', 'pandas', 'numpy', 'polars', 'pyarrow')"
    code = (
        "import sys, commdb\n"
        "t = commdb.open('generate:ranks=4,iterations=2'); r = t.sql('SELECT 1 AS one')\n"
        f"print(sorted(m for m in {heavy} if m in sys.modules))\n"
        "r.to_arrow()\n"
        "print(sorted(m for m in ('matplotlib', 'bokeh') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # Opening and querying import nothing; Arrow brings pyarrow (and what it imports), never a
    # plotting library.
    assert out.split() == ["[]", "[]"]
