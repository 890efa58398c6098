import json
import logging

import pytest

from euler import metrics
from euler.observability import JsonFormatter, RequestIdFilter, request_id_var

pytestmark = pytest.mark.django_db


def test_each_response_carries_a_request_id_and_keeps_a_sane_incoming_one(client):
    assert len(client.get("/healthz")["X-Request-ID"]) == 32
    assert client.get("/healthz", HTTP_X_REQUEST_ID="abc-123")["X-Request-ID"] == "abc-123"
    assert client.get("/healthz", HTTP_X_REQUEST_ID="bad id\n")["X-Request-ID"] != "bad id\n"


def test_each_whole_response_says_how_long_the_web_process_took(client):
    """`Server-Timing: app;dur=<ms>`: the process's share of a request, which a client behind a proxy subtracts."""
    header = client.get("/healthz")["Server-Timing"]
    name, _, dur = header.partition(";dur=")
    assert name == "app" and float(dur) >= 0


def test_json_logs_hold_the_request_id_and_extra_fields():
    record = logging.LogRecord("euler.test", logging.INFO, __file__, 1, "placed %d", (3,), None)
    record.node = "n1"
    token = request_id_var.set("rid-1")
    try:
        RequestIdFilter().filter(record)
    finally:
        request_id_var.reset(token)
    body = json.loads(JsonFormatter().format(record))
    assert body["message"] == "placed 3"
    assert body["request_id"] == "rid-1"
    assert body["node"] == "n1"
    assert body["level"] == "INFO"


def test_metrics_expose_counters_histograms_and_gauges(client):
    metrics.reset_for_tests()
    metrics.inc("euler_heartbeats_total", 3)
    metrics.observe("euler_gateway_latency_seconds", 0.003, agent="echo")
    text = client.get("/metrics").content.decode()
    assert "euler_heartbeats_total 3" in text
    assert 'euler_gateway_latency_seconds_bucket{agent="echo",le="0.005"} 1' in text
    assert 'euler_gateway_latency_seconds_count{agent="echo"} 1' in text
    assert "# TYPE euler_placements_total counter" in text


def test_metrics_require_the_token_when_one_is_set(client, settings):
    settings.EULER_METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
