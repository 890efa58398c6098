"""A service on its agent's console page: replicas (state, health, node, job) and scaling events."""

import pytest

from services import controller, writes

pytestmark = pytest.mark.django_db


def test_a_services_agent_page_shows_its_replicas_and_events(signed_in, project, settings):
    spec = {
        "name": "web", "image": "alpine:3.20", "command": ["httpd"], "port": 8080, "cpu_milli": 100,
        "memory_bytes": 64 * 2**20, "replicas": {"min": 2, "max": 2}, "target_concurrency": 10,
        "readiness": {"path": "/health", "interval_seconds": 5, "timeout_seconds": 2.0, "failures": 3},
    }  # fmt: skip
    service = writes.service_create(project=project, spec=spec)
    controller.reconcile_service(service.pk)
    body = signed_in.get("/agents/web/").content.decode()
    assert 'id="service"' in body and body.count("data-replica=") == 2
    assert "pending" in body and "created" in body
