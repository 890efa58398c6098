"""The node side of checkpoints over HTTP, driven by hand as a (possibly modified) agent would: incremental blobs,
commit as one set, a partial checkpoint never restored, fencing (an ended attempt, another node's job), the shared
limits and the quota recorded on the job, retention."""

from __future__ import annotations

import hashlib

import pytest

from jobs.checkpoints.models import Checkpoint, CheckpointBlob
from jobs.models import Attempt, Job, JobEvent
from jobs.outputs import selectors as output_selectors
from jobs.outputs import store
from nodeagent import protocol
from tests.checkpoints.conftest import NODE_API, blob_url, commit, entry, manifest, put_blob, restore, take

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(project, node_and_credential, make_job, node_api):
    node, credential = node_and_credential
    job, attempt = make_job(project, node)
    return job, attempt, node_api(credential)


def test_an_unchanged_file_is_not_sent_again(setup):
    job, attempt, client = setup
    first = take(client, attempt.pk, {"step": b"1", "model.bin": b"w" * 5000})
    assert len(first.uploads) == 2
    second = take(client, attempt.pk, {"step": b"2", "model.bin": b"w" * 5000})
    assert [u.sha256 for u in second.uploads] == [hashlib.sha256(b"2").hexdigest()]
    assert second.seq == first.seq + 1
    assert CheckpointBlob.objects.filter(job=job).count() == 3


def test_a_checkpoint_commits_only_when_every_blob_is_stored_and_a_partial_one_is_never_restored(setup):
    job, attempt, client = setup
    take(client, attempt.pk, {"step": b"1"})
    reply = manifest(client, attempt.pk, [entry("step", b"2"), entry("big", b"b" * 100)])
    plan = protocol.CheckpointPlan.model_validate(reply.json())
    one = next(u for u in plan.uploads if u.size == 1)
    assert put_blob(client, attempt.pk, one.blob_id, b"2").status_code == 200
    refused = commit(client, attempt.pk, plan.checkpoint_id)
    assert refused.status_code == 409 and refused.json()["code"] == "checkpoint_incomplete"
    listing = protocol.CheckpointRestore.model_validate(restore(client, attempt.pk).json())
    assert listing.seq == 1 and [f.path for f in listing.files] == ["step"]
    # The assignment of a next attempt names the committed one, never the pending one.
    from jobs.checkpoints.selectors import assignment_fields

    assert assignment_fields(job=job)["checkpoint"].restore_id == listing.checkpoint_id


def test_a_wrong_blob_is_refused_and_starts_again(setup):
    job, attempt, client = setup
    plan = protocol.CheckpointPlan.model_validate(manifest(client, attempt.pk, [entry("a", b"abc")]).json())
    bad = put_blob(client, attempt.pk, plan.uploads[0].blob_id, b"abd")
    assert bad.status_code == 400 and bad.json()["code"] == "sha256_mismatch"
    assert client.get(blob_url(attempt.pk, plan.uploads[0].blob_id)).json() == {"offset": 0, "complete": False}
    assert commit(client, attempt.pk, plan.checkpoint_id).status_code == 409


def test_the_restore_serves_the_bytes_to_the_next_attempt_on_another_node(
    setup, make_job, other_node_and_credential, node_api
):
    job, attempt, client = setup
    take(client, attempt.pk, {"step": b"7", "sub/state.json": b"{}"})
    Attempt.objects.filter(pk=attempt.pk).update(state="lost")
    other, credential = other_node_and_credential
    _, second = make_job(None, other, number=2, job=job)
    other_client = node_api(credential)
    listing = protocol.CheckpointRestore.model_validate(restore(other_client, second.pk).json())
    got = {}
    for f in listing.files:
        path = f.url.split("/node-api/v1/", 1)[1]
        body = b"".join(other_client.get(NODE_API + path).streaming_content)
        assert hashlib.sha256(body).hexdigest() == f.sha256
        got[f.path] = body
    assert got == {"step": b"7", "sub/state.json": b"{}"}


def test_a_node_can_write_no_checkpoint_for_an_ended_attempt(setup):
    job, attempt, client = setup
    plan = protocol.CheckpointPlan.model_validate(manifest(client, attempt.pk, [entry("a", b"abc")]).json())
    Attempt.objects.filter(pk=attempt.pk).update(state="succeeded")
    for reply in (
        manifest(client, attempt.pk, [entry("a", b"abc")]),
        put_blob(client, attempt.pk, plan.uploads[0].blob_id, b"abc"),
        commit(client, attempt.pk, plan.checkpoint_id),
        restore(client, attempt.pk),
    ):
        assert reply.status_code == 409 and reply.json()["code"] == "stale_attempt"
    assert not Checkpoint.objects.filter(job=job, state="committed").exists()
    assert not CheckpointBlob.objects.filter(job=job, complete=True).exists()


def test_a_stop_checkpoint_is_taken_while_the_attempt_is_stopping(setup):
    job, attempt, client = setup
    Attempt.objects.filter(pk=attempt.pk).update(stop_reason="cancelled")
    Job.objects.filter(pk=job.pk).update(state="cancelled")
    plan = take(client, attempt.pk, {"step": b"9"}, reason="stop")
    assert Checkpoint.objects.get(pk=plan.checkpoint_id).state == "committed"


def test_a_node_can_write_no_checkpoint_for_another_nodes_attempt(setup, other_node_and_credential, node_api):
    job, attempt, client = setup
    _, credential = other_node_and_credential
    reply = manifest(node_api(credential), attempt.pk, [entry("a", b"abc")])
    assert reply.status_code == 409 and reply.json()["code"] == "stale_attempt"
    assert not Checkpoint.objects.exists()


def test_a_blob_of_another_job_cannot_be_written_or_read(setup, project, make_job, node_and_credential):
    job, attempt, client = setup
    node, _ = node_and_credential
    plan = protocol.CheckpointPlan.model_validate(manifest(client, attempt.pk, [entry("a", b"abc")]).json())
    _, mine = make_job(project, node)
    reply = put_blob(client, mine.pk, plan.uploads[0].blob_id, b"abc")
    assert reply.status_code == 404 and reply.json()["code"] == "no_such_blob"
    data = NODE_API + protocol.PATH_ATTEMPT_CHECKPOINT_BLOB_DATA.format(
        attempt_id=mine.pk, blob_id=plan.uploads[0].blob_id
    )
    assert client.get(data).status_code == 404


def test_a_refusal_by_the_agent_is_recorded_on_the_job(setup):
    job, attempt, client = setup
    reply = manifest(client, attempt.pk, [], reason="stop", refused="more than 10000 files")
    assert reply.status_code == 422 and reply.json()["code"] == "checkpoint_refused"
    event = JobEvent.objects.get(job=job, reason="checkpoint_refused")
    assert "more than 10000 files" in event.message


def test_a_modified_agent_over_the_file_limit_is_refused_and_recorded(setup):
    job, attempt, client = setup
    files = [entry(f"f{i}", b"") for i in range(protocol.MAX_CHECKPOINT_FILES + 1)]
    reply = manifest(client, attempt.pk, files)
    # The manifest model bounds the list itself: refused before any row, as invalid.
    assert reply.status_code in (400, 422)
    assert not Checkpoint.objects.exists() and not CheckpointBlob.objects.exists()


def test_a_checkpoint_past_the_quota_is_refused_with_the_reason_on_the_job(setup, project):
    from quotas.models import Quota

    job, attempt, client = setup
    Quota.objects.filter(project=project).update(output_bytes=10_000)
    take(client, attempt.pk, {"a": b"x" * 5000})
    assert output_selectors.stored_bytes(project=project) == 5000  # checkpoints count against the quota
    reply = manifest(client, attempt.pk, [entry("a", b"x" * 5000), entry("b", b"y" * 6000)])
    assert reply.status_code == 422 and reply.json()["code"] == "quota_exceeded"
    assert "quota" in JobEvent.objects.get(job=job, reason="checkpoint_refused").message
    assert Checkpoint.objects.filter(job=job).count() == 1


def test_retention_keeps_the_last_two_and_removes_blobs_no_longer_named(
    setup, outputs_store, django_capture_on_commit_callbacks
):
    job, attempt, client = setup
    with django_capture_on_commit_callbacks(execute=True):
        plans = [take(client, attempt.pk, {"step": str(i).encode(), "same": b"s"}) for i in range(1, 5)]
    kept = list(Checkpoint.objects.filter(job=job).order_by("seq").values_list("seq", flat=True))
    assert kept == [plans[2].seq, plans[3].seq]
    shas = set(CheckpointBlob.objects.filter(job=job).values_list("sha256", flat=True))
    assert shas == {hashlib.sha256(x).hexdigest() for x in (b"3", b"4", b"s")}
    held = {p.name for p in (outputs_store / "ckpt" / str(job.pk)).iterdir()}
    assert held == {b.storage_key.rsplit("/", 1)[1] for b in CheckpointBlob.objects.filter(job=job)}


def test_an_earlier_attempts_pending_checkpoint_goes_at_the_next_commit(setup, make_job):
    job, attempt, client = setup
    manifest(client, attempt.pk, [entry("a", b"orphan")])
    Attempt.objects.filter(pk=attempt.pk).update(state="lost")
    _, second = make_job(None, attempt.node, number=2, job=job)
    take(client, second.pk, {"a": b"fresh"})
    assert list(Checkpoint.objects.filter(job=job).values_list("state", flat=True)) == ["committed"]
    assert not CheckpointBlob.objects.filter(job=job, sha256=hashlib.sha256(b"orphan").hexdigest()).exists()


def test_a_job_without_a_checkpoint_is_refused(project, node_and_credential, make_job, node_api):
    node, credential = node_and_credential
    _, attempt = make_job(project, node, checkpoint=None)
    reply = manifest(node_api(credential), attempt.pk, [entry("a", b"x")])
    assert reply.status_code == 400 and reply.json()["code"] == "no_checkpoint_declared"


def test_a_deleted_job_takes_its_blobs_from_the_store(setup, outputs_store, django_capture_on_commit_callbacks):
    job, attempt, client = setup
    take(client, attempt.pk, {"a": b"abc"})
    (blob,) = CheckpointBlob.objects.filter(job=job)
    with django_capture_on_commit_callbacks(execute=True):
        Job.objects.filter(pk=job.pk).delete()
    assert not (outputs_store / blob.storage_key).exists()
    assert store.is_bucket() is False


def test_checkpoints_of_jobs_ended_past_the_outputs_retention_are_removed(
    setup, settings, outputs_store, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.checkpoints import retention

    job, attempt, client = setup
    with django_capture_on_commit_callbacks(execute=True):
        take(client, attempt.pk, {"a": b"abc"})
    settings.EULER_OUTPUTS_RETENTION_DAYS = 30
    assert retention.purge_expired() == 0  # still running
    Job.objects.filter(pk=job.pk).update(state="succeeded", ended_at=timezone.now() - timedelta(days=31))
    with django_capture_on_commit_callbacks(execute=True):
        assert retention.purge_expired() == 1
    assert not Checkpoint.objects.filter(job=job).exists()
    assert not any((outputs_store / "ckpt" / str(job.pk)).iterdir())
