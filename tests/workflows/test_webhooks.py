"""Webhooks end to end on loopback: owner-only, SSRF-refused destinations, signed deliveries, retries, the log."""

from __future__ import annotations

import json
import time

import pytest

from tests.ports import free_port
from tests.workflows.receiver import Receiver
from workflows import signing, tasks
from workflows.models import Delivery, Webhook

pytestmark = pytest.mark.django_db


@pytest.fixture
def loopback_allowed(settings):
    """The operator setting that lets tests aim hooks at a receiver on loopback (docs/configuration.md)."""
    settings.EULER_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.EULER_WEBHOOK_RETRY_BACKOFF = 0.0  # each retry at once (the eager task runs it inline)
    return settings


def create(api, url, events=("job.state_changed",)) -> dict:
    r = api.post("/api/v1/webhooks", {"url": url, "events": list(events)}, format="json")
    assert r.status_code == 201, r.content
    return r.json()


def submit(api) -> int:
    from tests.jobs.conftest import seed_body

    r = api.post("/api/v1/jobs", seed_body(), format="json")
    assert r.status_code == 201, r.content
    return r.json()["id"]


def verified(secret: str, request) -> dict:
    headers, body = request
    assert signing.verify(secret, headers["euler-signature"], body, now=int(time.time()))
    return json.loads(body)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost:8080/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://100.100.100.200/",
        "http://[::1]/",
        "http://metadata.google.internal/",
    ],
)
def test_loopback_private_and_metadata_destinations_are_refused_at_create(api, url):
    r = api.post("/api/v1/webhooks", {"url": url, "events": ["job.ended"]}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "forbidden_address", r.content
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(
    "body, code",
    [
        ({"url": "ftp://example.com/", "events": ["job.ended"]}, "forbidden_address"),
        ({"url": "http://127.0.0.1:9/", "events": ["job.exploded"]}, "invalid_events"),
        ({"url": "http://127.0.0.1:9/", "events": []}, "invalid_events"),
        ({"url": "http://127.0.0.1:9/", "events": ["job.ended"], "secret": "mine"}, "unknown_field"),
    ],
)
def test_bad_hooks_get_a_400_with_a_code(api, loopback_allowed, body, code):
    r = api.post("/api/v1/webhooks", body, format="json")
    assert r.status_code == 400 and r.json()["code"] == code, r.content


def test_webhooks_are_owner_only(member_api, api, loopback_allowed):
    r = member_api.post("/api/v1/webhooks", {"url": "http://127.0.0.1:9/", "events": ["job.ended"]}, format="json")
    assert r.status_code == 403 and r.json()["code"] == "owner_required"
    hook = create(api, "http://127.0.0.1:9/")
    assert member_api.get("/api/v1/webhooks").status_code == 403
    assert member_api.delete(f"/api/v1/webhooks/{hook['id']}").status_code == 403
    assert member_api.get(f"/api/v1/webhooks/{hook['id']}/deliveries").status_code == 403


def test_the_secret_is_shown_once_and_stored_encrypted(api, loopback_allowed):
    from django.db import connection

    made = create(api, "http://127.0.0.1:9/")
    assert made["secret"].startswith("whsec_")
    assert "secret" not in api.get(f"/api/v1/webhooks/{made['id']}").json()
    assert "secret" not in api.get("/api/v1/webhooks").json()["results"][0]
    with connection.cursor() as cur:
        cur.execute("SELECT secret FROM workflows_webhook")
        stored = cur.fetchone()[0]
    assert made["secret"] not in stored


def test_another_projects_hook_answers_404(api, other_api, loopback_allowed):
    hook = create(api, "http://127.0.0.1:9/")
    assert other_api.get(f"/api/v1/webhooks/{hook['id']}").status_code == 404
    assert other_api.delete(f"/api/v1/webhooks/{hook['id']}").status_code == 404


def test_the_receiver_gets_every_event_signed_and_verifiable(api, loopback_allowed):
    with Receiver() as receiver:
        hook = create(api, receiver.url)
        job_id = submit(api)
        assert api.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 200
        tasks.webhook_dispatch()
        tasks.webhook_dispatch()  # a second run finds nothing new: each event once
    events = [verified(hook["secret"], request) for request in receiver.requests]
    assert [e["type"] for e in events] == ["job.queued", "job.cancelled"]
    assert all(e["data"]["job"]["id"] == job_id and e["project"] == "alpha" for e in events)
    assert events[1]["data"]["event"]["from_state"] == "queued" and events[1]["data"]["job"]["state"] == "cancelled"
    headers = receiver.requests[1][0]
    assert headers["euler-event"] == "job.cancelled" and headers["content-type"] == "application/json"
    log = api.get(f"/api/v1/webhooks/{hook['id']}/deliveries").json()["results"]
    assert [(d["event_type"], d["state"], d["tries"][0]["status_code"]) for d in log] == [
        ("job.cancelled", "succeeded", 200),
        ("job.queued", "succeeded", 200),
    ]


def test_a_hook_gets_only_the_events_it_chose(api, loopback_allowed):
    with Receiver() as receiver:
        create(api, receiver.url, events=["job.ended"])
        job_id = submit(api)
        api.post(f"/api/v1/jobs/{job_id}/cancel")
        tasks.webhook_dispatch()
    assert [json.loads(body)["type"] for _, body in receiver.requests] == ["job.cancelled"]


def test_a_receiver_answering_500_twice_gets_it_on_the_third_try_and_the_log_has_all_three(api, loopback_allowed):
    with Receiver(answers=[500, 500, 200]) as receiver:
        hook = create(api, receiver.url, events=["job.queued"])
        submit(api)
        tasks.webhook_dispatch()
    assert len(receiver.requests) == 3
    bodies = {verified(hook["secret"], request)["id"] for request in receiver.requests}
    assert len(bodies) == 1  # the same event each time, signed afresh
    (delivery,) = api.get(f"/api/v1/webhooks/{hook['id']}/deliveries").json()["results"]
    assert delivery["state"] == "succeeded" and delivery["attempts"] == 3
    tries = delivery["tries"]
    assert [t["status_code"] for t in tries] == [500, 500, 200] and [t["number"] for t in tries] == [1, 2, 3]
    assert tries[0]["response_excerpt"] == "answer 500 to request 1" and all(t["latency_ms"] >= 0 for t in tries)


def test_redeliver_sends_the_payload_again_as_a_new_delivery(api, loopback_allowed, django_capture_on_commit_callbacks):
    with Receiver() as receiver:
        hook = create(api, receiver.url, events=["job.queued"])
        submit(api)
        tasks.webhook_dispatch()
        (original,) = api.get(f"/api/v1/webhooks/{hook['id']}/deliveries").json()["results"]
        with django_capture_on_commit_callbacks(execute=True):
            r = api.post(f"/api/v1/webhooks/{hook['id']}/deliveries/{original['id']}/redeliver")
        assert r.status_code == 202 and r.json()["redelivery_of"] == original["id"]
    assert len(receiver.requests) == 2 and receiver.requests[0][1] == receiver.requests[1][1]
    log = api.get(f"/api/v1/webhooks/{hook['id']}/deliveries").json()["results"]
    assert [d["state"] for d in log] == ["succeeded", "succeeded"]


def test_a_destination_that_turns_private_is_refused_at_delivery(api, loopback_allowed):
    with Receiver() as receiver:
        hook = create(api, receiver.url, events=["job.queued"])
        loopback_allowed.EULER_WEBHOOK_ALLOWED_NETWORKS = []  # now loopback is refused, as in production
        loopback_allowed.EULER_WEBHOOK_MAX_TRIES = 2
        submit(api)
        tasks.webhook_dispatch()
    assert receiver.requests == []
    (delivery,) = api.get(f"/api/v1/webhooks/{hook['id']}/deliveries").json()["results"]
    assert delivery["state"] == "failed" and "forbidden address" in delivery["tries"][0]["error"]


def test_a_dead_endpoint_is_logged_and_retried_later(api, loopback_allowed):
    loopback_allowed.EULER_WEBHOOK_RETRY_BACKOFF = 60.0
    port = free_port()  # reserved for this process, and nothing listens on it
    hook = create(api, f"http://127.0.0.1:{port}/", events=["job.queued"])
    submit(api)
    tasks.webhook_dispatch()
    delivery = Delivery.objects.get(hook_id=hook["id"])
    assert delivery.state == "pending" and delivery.attempts == 1 and delivery.tries.get().status_code is None
    assert delivery.tries.get().error


def test_deleting_a_hook_stops_its_deliveries(api, loopback_allowed):
    with Receiver() as receiver:
        hook = create(api, receiver.url)
        assert api.delete(f"/api/v1/webhooks/{hook['id']}").status_code == 204
        submit(api)
        tasks.webhook_dispatch()
    assert receiver.requests == []


def test_a_claimed_batch_whose_message_was_lost_is_sent_again_after_five_minutes(api, loopback_allowed):
    from datetime import timedelta

    from django.utils import timezone

    from workflows import dispatch

    with Receiver() as receiver:
        hook = create(api, receiver.url, events=["job.queued"])
        submit(api)
        dispatch.dispatch()
        (batch,) = dispatch.claim()  # claimed, but its message never reaches a worker (a restart)
        assert dispatch.claim() == []  # the project has a batch in flight: no second one
        assert dispatch.claim(now=timezone.now() + timedelta(minutes=6)) == [[(batch[0][0], 2)]]
        tasks.webhook_deliver(batch)  # the stale message names attempt 1: it sends nothing
        assert receiver.requests == []
        tasks.webhook_deliver([(batch[0][0], 2)])
    assert len(receiver.requests) == 1
    assert Delivery.objects.get(hook_id=hook["id"]).state == "succeeded"


def test_old_ended_deliveries_leave_the_log(api, loopback_allowed):
    from datetime import timedelta

    from django.utils import timezone

    from workflows import dispatch

    with Receiver() as receiver:
        hook = create(api, receiver.url, events=["job.queued"])
        submit(api)
        submit(api)
        tasks.webhook_dispatch()
    assert len(receiver.requests) == 2
    old, new = Delivery.objects.filter(hook_id=hook["id"]).order_by("id")
    Delivery.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    assert dispatch.prune(days=30) == 1
    assert list(Delivery.objects.values_list("id", flat=True)) == [new.pk]
    assert dispatch.prune(days=0) == 0
