"""The README's ten minutes on the demo, asked from Python: the same numbers."""

from conftest import value


def test_what_is_this_run(demo):
    row = demo.sql(
        "SELECT ranks, events, format_duration(duration_ns) AS duration, warnings FROM trace_info"
    ).to_arrow().to_pylist()[0]
    assert row["ranks"] == 64
    assert row["events"] == 461_440
    assert row["duration"] == "25.83 ms"
    assert row["warnings"] == 0


def test_every_message_crosses_a_node(demo):
    rows = demo.sql("SELECT intra_node, count(*) AS messages, avg(duration) AS mean FROM messages GROUP BY intra_node").to_pandas()
    assert list(rows["intra_node"]) == [False]
    assert int(rows["messages"][0]) == 44_800
    assert round(rows["mean"][0] / 1000, 1) == 9.1


def test_every_rank_is_slow_for_its_mapping(demo):
    causes = demo.sql("SELECT cause, count(*) AS ranks FROM rank_diagnosis() GROUP BY cause").to_pandas()
    assert causes.set_index("cause")["ranks"].to_dict() == {"mapping": 64}


def test_background_traffic_from_8_to_14_ms(demo):
    windows = demo.sql(
        "SELECT window_start, cause FROM attribution(window_ns => '1ms') WHERE cause LIKE '%background_traffic%' ORDER BY window_start"
    ).to_pandas()
    assert len(windows) == 6
    assert windows["window_start"].min() // 1_000_000 == 8
    assert windows["window_start"].max() // 1_000_000 == 13


def test_steady_high_trend(demo):
    trend = demo.sql(
        "SELECT t_start, t_end, mean_latency FROM latency_trend() WHERE kind = 'steady_high'"
    ).to_pandas()
    assert len(trend) == 1
    assert round(trend["t_start"][0] / 1e6) == 8 and round(trend["t_end"][0] / 1e6) == 14
    assert round(trend["mean_latency"][0], 1) == 4.9


def test_remapping_saves_86_percent(demo):
    row = demo.sql("SELECT inter_messages_before, inter_messages_after FROM remap_summary()").to_arrow().to_pylist()[0]
    assert (row["inter_messages_before"], row["inter_messages_after"]) == (44_800, 6_400)


def test_collectives_dominate_the_waiting(demo):
    waits = demo.sql("SELECT pattern, sum(wait_ns) AS ns FROM wait_states() GROUP BY pattern ORDER BY ns DESC").to_pandas()
    totals = dict(zip(waits["pattern"], waits["ns"]))
    late_sender = totals.pop("late_sender")
    assert round(late_sender / 1000) == 695
    assert round(sum(totals.values()) / 1e6, 1) == 134.6


def test_views_narrow_an_analysis(demo):
    demo.execute("CREATE OR REPLACE VIEW late AS SELECT * FROM messages WHERE send_ts > 8e6")
    assert value(demo, "SELECT count(*) FROM rank_diagnosis('late')") == 64
