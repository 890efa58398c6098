from datetime import UTC, date, datetime, timedelta

from django.http import QueryDict

from console import charts
from console.agentcharts import buckets
from console.forms import key_values, serializer_errors
from console.jobform import payload_from_form
from console.present import node_command


def test_a_bar_is_never_fuller_than_its_limit():
    assert charts.percent(50, 100) == 50
    assert charts.percent(150, 100) == 100
    assert charts.percent(0, 0) == 0 and charts.percent(1, 0) == 100


def test_bars_scale_to_the_highest_value_and_fill_the_width():
    chart = charts.bar_chart([("a", 1), ("b", 4), ("c", 2)], width=300, height=100, gap=0)
    assert [b.height for b in chart.bars] == [24.0, 96.0, 48.0]
    assert chart.bars[2].x + chart.bars[2].width == 300
    assert chart.peak == 4 and not chart.empty


def test_a_line_shares_the_scale_of_the_bars():
    chart = charts.bar_chart([("a", 1), ("b", 1)], line_points=[2, 0], width=200, height=104, gap=0)
    assert chart.line == "50.0,4.0 150.0,104.0"
    assert chart.bars[0].height == 50.0


def test_an_all_zero_series_is_empty():
    assert charts.bar_chart([("a", 0)]).empty and charts.bar_chart([]).empty


def test_daily_series_fills_missing_days_with_zero():
    days = [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)]
    assert charts.daily_series([(date(2026, 1, 2), 5), (date(2026, 1, 2), 1)], days) == [
        ("2026-01-01", 0.0),
        ("2026-01-02", 6.0),
        ("2026-01-03", 0.0),
    ]


def test_buckets_summarise_calls_success_and_latency_per_step():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [(start + timedelta(minutes=1), 200, 10.0), (start + timedelta(minutes=2), 503, 30.0)]
    rows.append((start + timedelta(minutes=61), 200, 5.0))
    rows.append((start - timedelta(minutes=1), 200, 1.0))  # before the window: ignored
    out = buckets(rows, start=start, step=timedelta(hours=1), count=3)
    assert [b["calls"] for b in out] == [2, 1, 0]
    assert out[0]["success_rate"] == 0.5 and out[0]["p95_ms"] == 30.0
    assert out[2]["p50_ms"] is None


def test_serializer_errors_keep_the_first_message_per_field():
    assert serializer_errors({"name": ["bad", "worse"], "non_field_errors": ["whole"]}) == {
        "name": "bad",
        "form": "whole",
    }
    assert serializer_errors({"instances": [{}, {"base_url": ["refused"]}]}) == {"instances": "base_url: refused"}


def test_key_values_names_the_first_bad_line():
    assert key_values("A=1\n\nB==2") == ({"A": "1", "B": "=2"}, None)
    assert key_values("A=1\noops")[1] == "oops"


def test_the_job_form_becomes_the_api_payload():
    post = QueryDict(mutable=True)
    post.update({"name": " n ", "image": "alpine:3.20", "command": "echo 'a b'", "cpu_cores": "1.5", "memory_mib": "2"})
    post.update({"gpu_count": "x", "timeout_seconds": "30", "node_selector": "zone=a"})
    payload, errors = payload_from_form(post)
    assert errors == {}
    assert payload["command"] == ["echo", "a b"] and payload["cpu_milli"] == 1500
    assert payload["memory_bytes"] == 2 * 1024 * 1024 and payload["gpu_count"] == "x"  # the API explains
    assert payload["node_selector"] == {"zone": "a"} and payload["retry_on"] == []


def test_the_job_form_reports_what_it_cannot_read():
    post = QueryDict("command=echo+'oops&cpu_cores=many&memory_mib=1e")
    _, errors = payload_from_form(post)
    assert set(errors) == {"command", "cpu_milli", "memory_bytes"}


def test_the_node_command_names_the_url_and_the_token():
    assert node_command(public_url="https://euler.example/", token="euler_enroll_x") == (
        "EULER_CONTROL_PLANE_URL=https://euler.example EULER_ENROLLMENT_TOKEN=euler_enroll_x ./euler-node"
    )
