"""The wire schema v1: strict requests, lenient replies, constraints on names, labels and sizes."""

import pytest
from pydantic import ValidationError

from nodeagent import protocol

RES = {"cpu_milli": 1000, "memory_bytes": 1 << 30}


def test_the_protocol_has_a_version_number_sent_by_default():
    assert protocol.PROTOCOL_VERSION == 1
    assert protocol.Heartbeat(resources=RES).protocol_version == 1


def test_requests_from_nodes_refuse_unknown_fields():
    with pytest.raises(ValidationError):
        protocol.Heartbeat.model_validate({"resources": RES, "privileged": True})
    with pytest.raises(ValidationError):
        protocol.EnrollRequest.model_validate({"token": "t", "name": "n", "resources": RES, "binds": ["/:/host"]})


def test_replies_ignore_fields_a_newer_server_adds():
    reply = protocol.HeartbeatReply.model_validate({"approval": "approved", "heartbeat_interval": 5, "new_thing": 1})
    assert reply.approval == "approved" and reply.commands == []
    poll = protocol.PollReply.model_validate({"assignments": [], "commands": [], "later": {}})
    assert poll.assignments == []


@pytest.mark.parametrize("name", ["", "-lead", "has space", "x" * 64, "ünï"])
def test_node_names_are_1_to_63_safe_characters(name):
    with pytest.raises(ValidationError):
        protocol.EnrollRequest(token="t", name=name, resources=RES)


def test_labels_and_regions_are_constrained():
    ok = protocol.EnrollRequest(token="t", name="n-1.a_b", region="cn-hz", labels={"k8s.io/zone": "a-1"}, resources=RES)
    assert ok.labels == {"k8s.io/zone": "a-1"}
    for bad in ({"labels": {"k": "with space"}}, {"labels": {"": "v"}}, {"region": "a b"}):
        with pytest.raises(ValidationError):
            protocol.EnrollRequest(token="t", name="n", resources=RES, **bad)


def test_resources_refuse_negative_or_absurd_figures():
    for bad in (
        {"cpu_milli": -1, "memory_bytes": 1},
        {"cpu_milli": 10**9, "memory_bytes": 1},
        {"cpu_milli": 1, "memory_bytes": -5},
    ):
        with pytest.raises(ValidationError):
            protocol.Resources.model_validate(bad)
    gpu = {"uuid": "GPU-1", "index": 0, "memory_bytes": 1, "utilization": 101}
    with pytest.raises(ValidationError):
        protocol.Resources.model_validate({**RES, "gpus": [gpu]})


def test_a_command_names_its_attempt_and_a_known_type():
    assert protocol.Command(type="stop_attempt", attempt_id=3).reason == ""
    with pytest.raises(ValidationError):
        protocol.Command.model_validate({"type": "format_disk", "attempt_id": 3})


def test_poll_waits_are_bounded():
    assert protocol.PollRequest().wait == protocol.POLL_WAIT_SECONDS
    with pytest.raises(ValidationError):
        protocol.PollRequest(wait=protocol.POLL_WAIT_MAX_SECONDS + 1)
    assert protocol.PollRequest(wait=protocol.POLL_WAIT_MAX_SECONDS).wait == protocol.POLL_WAIT_MAX_SECONDS


def test_one_chunk_of_the_worst_output_always_fits_a_log_request():
    worst = "\x01" * protocol.MAX_LOG_CHUNK_BYTES  # each control character escapes to 6 bytes
    body = {"chunks": [{"seq": 10**12, "offset": 10**15, "stream": "stderr", "data": worst}]}
    assert len(protocol.encode_json(body)) <= protocol.MAX_LOG_REQUEST_BYTES
    replaced = "\ufffd" * protocol.MAX_LOG_CHUNK_BYTES  # invalid UTF-8, 3 bytes each
    assert len(protocol.encode_json({"chunks": [{"data": replaced}]})) <= protocol.MAX_LOG_REQUEST_BYTES
