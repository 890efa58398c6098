from datetime import timedelta

import pytest
from django.utils import timezone

from agents.services import agent_create
from gateway import recorder
from gateway.stats import breakdown, percentile, summarise

pytestmark = pytest.mark.django_db


def test_percentiles_are_nearest_rank():
    values = sorted(float(v) for v in range(1, 101))
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([], 50) is None


def test_a_summary_counts_5xx_as_failures_and_4xx_as_successes():
    summary = summarise([(200, 1.0), (404, 2.0), (502, 3.0), (200, 4.0)])
    assert summary["calls"] == 4 and summary["success_rate"] == 0.75


def test_a_breakdown_splits_by_instance_and_status_class():
    result = breakdown([(1, 200, 1.0), (2, 200, 2.0), (2, 503, 9.0), (None, 503, 0.5)])
    assert result["total"]["calls"] == 4
    assert [i["instance_id"] for i in result["instances"]] == [1, 2, None]
    assert result["status_classes"] == {"2xx": 2, "5xx": 2}


def record(agent, instance_id, status, latency, age=timedelta(0)):
    recorder.add(
        recorder.Record(
            project_id=agent.project_id,
            agent_id=agent.pk,
            instance_id=instance_id,
            method="GET",
            path="/x",
            status=status,
            latency_ms=latency,
            ttfb_ms=latency,
            bytes_in=0,
            bytes_out=10,
            error="",
            request_id="r",
            created_at=timezone.now() - age,
        )
    )


@pytest.fixture
def agent(project, settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    recorder.autostart = False
    return agent_create(project=project, fields={"name": "s"}, instances=[{"base_url": "http://127.0.0.1:9"}])


def test_the_stats_endpoint_reports_the_window_only(api, agent):
    instance_id = agent.instances.get().pk
    for latency in range(1, 11):
        record(agent, instance_id, 200, float(latency))
    record(agent, instance_id, 502, 50.0)
    record(agent, instance_id, 200, 1.0, age=timedelta(hours=2))
    assert recorder.flush() == 12
    hour = api.get("/api/v1/agents/s/stats?window=1h").json()
    assert hour["total"]["calls"] == 11
    assert hour["total"]["success_rate"] == round(10 / 11, 4)
    assert hour["total"]["p50_ms"] == 6.0
    assert hour["status_classes"] == {"2xx": 10, "5xx": 1}
    assert hour["instances"][0]["instance_id"] == instance_id
    assert api.get("/api/v1/agents/s/stats?window=24h").json()["total"]["calls"] == 12


def test_a_bad_window_answers_400(api, agent):
    response = api.get("/api/v1/agents/s/stats?window=1y")
    assert response.status_code == 400 and response.json()["code"] == "invalid_window"


def test_another_projects_stats_answer_404(other_api, agent):
    assert other_api.get("/api/v1/agents/s/stats").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_records_of_a_deleted_agent_are_dropped_not_fatal(agent):
    record(agent, agent.instances.get().pk, 200, 1.0)
    agent.delete()
    assert recorder.flush() == 0
    assert recorder.pending() == 0


def test_old_invocation_records_are_pruned(agent):
    from gateway.models import Invocation
    from gateway.tasks import prune_invocations

    record(agent, None, 200, 1.0, age=timedelta(days=40))
    record(agent, None, 200, 1.0)
    recorder.flush()
    assert prune_invocations() == 1
    assert Invocation.objects.count() == 1
