"""An attempt whose outputs are arriving is not failed by the deadline backstop while they arrive."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.attempts import deadlines_expire
from jobs.models import Attempt
from nodeagent import protocol
from tests.outputs.conftest import entry, plan, put_chunk

pytestmark = pytest.mark.django_db


def test_the_manifest_and_each_chunk_push_the_backstop_past_now(project, node_and_credential, make_job, node_api):
    node, credential = node_and_credential
    client = node_api(credential)
    job, attempt = make_job(project, node)
    # The job ended at its timeout; the backstop is due in a second, and the agent starts uploading.
    Attempt.objects.filter(pk=attempt.pk).update(deadline_at=timezone.now() + timedelta(seconds=1))
    data = os.urandom(2000)
    upload = protocol.OutputsPlan.model_validate(plan(client, attempt.pk, [entry("out/m", data)]).json()).uploads[0]
    assert Attempt.objects.get(pk=attempt.pk).deadline_at > timezone.now() + timedelta(seconds=30)
    Attempt.objects.filter(pk=attempt.pk).update(deadline_at=timezone.now() + timedelta(seconds=1))
    assert put_chunk(client, attempt.pk, upload.file_id, data[:1000], 0, len(data)).status_code == 200
    assert deadlines_expire(now=timezone.now() + timedelta(seconds=5)) == 0
    assert Attempt.objects.get(pk=attempt.pk).state == "running"
    # Without uploads the backstop still ends it.
    assert deadlines_expire(now=timezone.now() + timedelta(seconds=3600)) == 1
