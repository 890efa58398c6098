import pytest

from agents.models import Agent

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def loopback_allowed(settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]


def test_registering_an_agent_leads_to_its_page(signed_in, project):
    response = signed_in.post(
        "/agents/",
        {"name": "echo", "base_urls": "http://127.0.0.1:9\nhttp://127.0.0.2:9", "health_path": "/health"},
    )
    assert response.status_code == 302 and response["Location"] == "/agents/echo/"
    agent = Agent.objects.get(project=project, name="echo")
    assert agent.instances.count() == 2
    body = signed_in.get("/agents/echo/").content.decode()
    assert "http://127.0.0.2:9" in body and "<svg" not in body or "No data yet" in body


def test_a_refused_address_is_shown_next_to_the_urls(signed_in, settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = []
    response = signed_in.post("/agents/", {"name": "meta", "base_urls": "http://100.100.100.200/"})
    assert response.status_code == 400
    assert "refused" in response.content.decode().split('id="err-base_urls"')[1].split("</p>")[0]
    assert not Agent.objects.exists()


def test_a_bad_name_is_shown_next_to_the_name(signed_in):
    response = signed_in.post("/agents/", {"name": "", "base_urls": ""})
    assert response.status_code == 400
    assert response.content.decode().split('id="err-name"')[1].split("</p>")[0].strip()


def test_the_auth_header_value_is_never_shown(signed_in):
    signed_in.post(
        "/agents/",
        {
            "name": "sec",
            "base_urls": "http://127.0.0.1:9",
            "auth_header_name": "Authorization",
            "auth_header_value": "Bearer s3cret",
        },
    )
    assert "s3cret" not in signed_in.get("/agents/sec/").content.decode()


def test_another_projects_agent_is_404(signed_in, other_project):
    from agents.services import agent_create

    agent_create(project=other_project, fields={"name": "theirs"}, instances=[])
    assert signed_in.get("/agents/theirs/").status_code == 404


def test_the_charts_draw_recorded_calls(signed_in, project):
    from django.utils import timezone

    from agents.services import agent_create
    from gateway.models import Invocation

    agent = agent_create(project=project, fields={"name": "busy"}, instances=[])
    now = timezone.now()
    Invocation.objects.bulk_create(
        Invocation(
            project=project,
            agent=agent,
            method="GET",
            path="/",
            status=200 if i % 4 else 502,
            latency_ms=5 + i,
            created_at=now,
        )
        for i in range(20)
    )
    body = signed_in.get("/agents/busy/?window=1h").content.decode()
    assert body.count("<svg") == 3 and "20 calls" in body
