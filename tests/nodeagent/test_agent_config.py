import pytest

from nodeagent.config import ConfigError, default_name, load, parse_labels


def _env(**over):
    return {"EULER_CONTROL_PLANE_URL": "https://euler.example.com", "EULER_NODE_NAME": "n1", **over}


def test_a_full_configuration_is_read_from_the_environment(tmp_path):
    c = load(
        _env(
            EULER_NODE_REGION="cn-hz",
            EULER_NODE_LABELS="zone=a, disk=ssd",
            EULER_NODE_STATE_DIR=str(tmp_path),
            EULER_ENROLLMENT_TOKEN="euler_enroll_x",
        )
    )
    assert c.url == "https://euler.example.com" and c.name == "n1" and c.region == "cn-hz"
    assert (
        c.labels == {"zone": "a", "disk": "ssd"} and c.state_dir == tmp_path and c.enrollment_token == "euler_enroll_x"
    )


def test_plain_http_to_a_remote_host_is_refused_saying_why():
    with pytest.raises(ConfigError, match="refusing plain http:// to euler.example.com"):
        load(_env(EULER_CONTROL_PLANE_URL="http://euler.example.com"))


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://localhost:8000/", "http://[::1]:8000"])
def test_plain_http_to_loopback_is_allowed(url):
    assert load(_env(EULER_CONTROL_PLANE_URL=url)).url.startswith("http://")


def test_the_insecure_flag_allows_plain_http_on_a_test_network():
    assert load(_env(EULER_CONTROL_PLANE_URL="http://10.0.0.5:8000", EULER_ALLOW_INSECURE_HTTP="true")).allow_insecure


def test_a_node_api_suffix_in_the_url_is_tolerated():
    assert load(_env(EULER_CONTROL_PLANE_URL="https://e.example.com/node-api/v1/")).url == "https://e.example.com"


@pytest.mark.parametrize(
    "over,match",
    [
        ({"EULER_CONTROL_PLANE_URL": ""}, "EULER_CONTROL_PLANE_URL is required"),
        ({"EULER_CONTROL_PLANE_URL": "ftp://x"}, "http"),
        ({"EULER_NODE_NAME": "bad name"}, "EULER_NODE_NAME"),
        ({"EULER_NODE_LABELS": "novalue"}, "EULER_NODE_LABELS"),
        ({"EULER_NODE_LABELS": "k=has space"}, "EULER_NODE_LABELS"),
        ({"EULER_NODE_REGION": "a/b"}, "EULER_NODE_REGION"),
        ({"EULER_ALLOW_INSECURE_HTTP": "maybe"}, "EULER_ALLOW_INSECURE_HTTP"),
        ({"EULER_NODE_TERMS": "{nope"}, "EULER_NODE_TERMS: not JSON"),
        ({"EULER_NODE_TERMS": "[1, 2]"}, "EULER_NODE_TERMS: a JSON object"),
        ({"EULER_NODE_TERMS": "@/nonexistent/terms.json"}, "cannot read the file"),
    ],
)
def test_bad_settings_name_the_variable(over, match):
    with pytest.raises(ConfigError, match=match):
        load(_env(**over))


def test_the_default_name_is_the_host_name_made_valid():
    assert default_name("gpu box_1.example.com") == "gpu-box_1"
    assert default_name("---") == "node"


def test_labels_parse_from_k_equals_v_pairs():
    assert parse_labels("") == {}
    assert parse_labels("a=1,b=") == {"a": "1", "b": ""}


def test_the_lenders_terms_are_read_as_json_or_from_a_file(tmp_path):
    assert load(_env()).terms is None
    body = '{"timezone": "Europe/Berlin", "max_job_hours": 4}'
    assert load(_env(EULER_NODE_TERMS=body)).terms == {"timezone": "Europe/Berlin", "max_job_hours": 4}
    (tmp_path / "terms.json").write_text(body)
    assert load(_env(EULER_NODE_TERMS=f"@{tmp_path / 'terms.json'}")).terms["max_job_hours"] == 4
