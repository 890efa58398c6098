"""The CLI's pure parts: unit parsers, the job body builder, exit statuses, errors, the config file."""

from __future__ import annotations

import stat

import pytest
from euler_client.config import config_path, read_profiles, resolve, write_profile
from euler_client.errors import ConfigError, NotFound, QuotaExceeded, ServerError, Unauthorized, error_from_answer
from euler_client.parse import (
    ParseError,
    default_name,
    exit_status,
    job_body,
    parse_bytes,
    parse_cpu,
    parse_duration,
    parse_env,
    parse_env_file,
    parse_labels,
)


@pytest.mark.parametrize(("text", "milli"), [("500m", 500), ("1.5", 1500), ("2", 2000), ("0.25", 250), ("1m", 1)])
def test_cpu_reads_cores_and_millicores(text, milli):
    assert parse_cpu(text) == milli


@pytest.mark.parametrize("text", ["", "abc", "0", "-1", "0.0001", "1.5m", "5x", "nan", "inf", "m"])
def test_cpu_refuses_what_is_not_an_amount(text):
    with pytest.raises(ParseError):
        parse_cpu(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [("256Mi", 256 << 20), ("1Gi", 1 << 30), ("1.5Gi", 3 << 29), ("10Gi", 10 << 30), ("500M", 500_000_000),
     ("1k", 1000), ("64MiB", 64 << 20), ("1048576", 1 << 20), ("2Ti", 2 << 40), (" 1 Mi", 1 << 20), (".5Ki", 512),
     ("512 B", 512)],
)  # fmt: skip
def test_sizes_read_kubernetes_units(text, size):
    assert parse_bytes(text) == size


# "1ki": a unit the pattern once took and the table lacked (a KeyError then); "٣Mi": a digit, but not 0-9.
@pytest.mark.parametrize(
    "text", ["", "Mi", "256Xi", "-1Gi", "0", "0.5", "1.5.2Gi", "1 Gb b", "1ki", "5.Mi", ".", "1Mi B", "٣Mi"]
)
def test_sizes_refuse_malformed_text(text):
    with pytest.raises(ParseError):
        parse_bytes(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("300", 300), ("90s", 90), ("5m", 300), ("1h", 3600), ("1h30m", 5400), ("2d", 172800), ("1h0m5s", 3605)],
)
def test_durations_read_seconds_and_units(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "5x", "m", "30m1h", "1.5h", "-5", "h1", "5ms", "1h 30m", "²"])
def test_durations_refuse_malformed_text(text):
    with pytest.raises(ParseError):
        parse_duration(text)


def test_env_takes_pairs_and_names_from_the_shell():
    assert parse_env(["A=1", "B=x=y", "HOME_DIR"], environ={"HOME_DIR": "/h"}) == {
        "A": "1",
        "B": "x=y",
        "HOME_DIR": "/h",
    }
    with pytest.raises(ParseError):
        parse_env(["UNSET_HERE"], environ={})


def test_env_file_reads_dotenv_lines():
    text = "# comment\n\nexport A=1\nB=\"two words\"\nC='q'\n D = spaced \n"
    assert parse_env_file(text) == {"A": "1", "B": "two words", "C": "q", "D": "spaced"}
    with pytest.raises(ParseError, match="line 1"):
        parse_env_file("no equals sign")


def test_labels_need_key_equals_value():
    assert parse_labels(["zone=a", "disk=ssd"]) == {"zone": "a", "disk": "ssd"}
    with pytest.raises(ParseError):
        parse_labels(["zone"])


def test_default_name_is_the_image_name():
    assert default_name("registry:5000/team/trainer:1.2") == "trainer"
    assert default_name("alpine") == "alpine"
    assert default_name("x/y@sha256:abc") == "y"


def test_job_body_passes_flags_as_api_fields_including_disk_priority_and_network():
    body = job_body(
        image="euler-test/busybox", command=["sh", "-c", "echo hi"], cpu_milli=500, memory_bytes=256 << 20,
        disk_bytes=10 << 30, priority=-5, network="none", gpu_count=None, env={}, node_selector={"zone": "a"},
        retry_on=["lost", "failed"],
    )  # fmt: skip
    assert body == {
        "name": "busybox", "image": "euler-test/busybox", "command": ["sh", "-c", "echo hi"], "cpu_milli": 500,
        "memory_bytes": 256 << 20, "disk_bytes": 10 << 30, "priority": -5, "network": "none",
        "node_selector": {"zone": "a"}, "retry_on": ["lost", "failed"], "timeout_seconds": 3600,
    }  # fmt: skip


def test_job_body_flags_override_the_job_file_and_defaults_fill_the_rest():
    file_body = {"name": "train", "image": "a:1", "command": ["x"], "cpu_milli": 2000, "max_retries": 3}
    body = job_body(file_body=file_body, image=None, command=[], cpu_milli=4000, priority=None)
    assert body == {"name": "train", "image": "a:1", "command": ["x"], "cpu_milli": 4000, "max_retries": 3,
                    "memory_bytes": 256 << 20, "timeout_seconds": 3600}  # fmt: skip


@pytest.mark.parametrize(
    ("job", "code"),
    [
        ({"state": "succeeded", "exit_code": 0, "reason": "exited"}, 0),
        ({"state": "failed", "exit_code": 3, "reason": "exited"}, 3),
        ({"state": "failed", "exit_code": None, "reason": "timeout"}, 125),
        ({"state": "failed", "exit_code": 137, "reason": "oom"}, 125),
        ({"state": "failed", "exit_code": None, "reason": "disk_limit"}, 125),
        ({"state": "cancelled", "exit_code": None, "reason": "cancelled"}, 125),
        ({"state": "lost", "exit_code": None, "reason": "lost"}, 125),
    ],
)
def test_exit_status_is_the_jobs_exit_code_or_125_with_the_reason(job, code):
    status, why = exit_status({"id": 7, **job})
    assert status == code
    assert (why == "") == (code != 125)
    if code == 125:
        assert job["reason"] in why


def test_errors_are_typed_by_status_and_keep_the_servers_code():
    assert isinstance(error_from_answer(404, {"code": "not_found", "detail": "No such job."}), NotFound)
    e = error_from_answer(401, {"code": "invalid_api_key", "detail": "Invalid key."})
    assert isinstance(e, Unauthorized) and e.code == "invalid_api_key" and e.exit_code == 77
    q = error_from_answer(429, {"code": "quota_exceeded", "detail": "Spent.", "resource": "cpu"}, {"retry-after": "30"})
    assert isinstance(q, QuotaExceeded) and q.retry_after == 30 and q.body["resource"] == "cpu"
    assert isinstance(error_from_answer(502, "bad gateway"), ServerError)
    v = error_from_answer(400, {"code": "invalid", "detail": "Invalid input.", "errors": {"cpu_milli": ["too big"]}})
    assert "cpu_milli: too big" in v.message and "\n" not in v.message


def test_login_file_is_0600_and_keeps_other_profiles(tmp_path):
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    path = config_path(environ)
    write_profile(path, "default", url="http://a", api_key="euler_pk_one")
    write_profile(path, "lab", url="http://b", api_key='euler_pk_"two"')
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert read_profiles(path) == {
        "default": {"url": "http://a", "api_key": "euler_pk_one"},
        "lab": {"url": "http://b", "api_key": 'euler_pk_"two"'},
    }
    assert resolve(environ=environ).api_key == "euler_pk_one"
    assert resolve(profile="lab", environ=environ).url == "http://b"
    assert resolve(environ={**environ, "EULER_API_KEY": "euler_pk_env"}).api_key == "euler_pk_env"
    with pytest.raises(ConfigError):
        resolve(profile="missing", environ=environ)
    with pytest.raises(ConfigError):
        resolve(environ={"XDG_CONFIG_HOME": str(tmp_path / "none")})
