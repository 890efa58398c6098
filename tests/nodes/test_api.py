import pytest

from nodes import services
from nodes.models import EnrollmentToken, Node

pytestmark = pytest.mark.django_db

TOKENS = "/api/v1/nodes/enrollment-tokens"


def _node(name, *, project=None, trust="untrusted", approval="approved", online=True, public=False, **kw):
    return Node.objects.create(
        name=name,
        owner_project=project,
        trust=trust,
        approval=approval,
        online=online,
        public_pool=public,
        cpu_milli=kw.pop("cpu", 4000),
        memory_bytes=kw.pop("mem", 1 << 30),
        **kw,
    )


def test_a_project_creates_a_token_and_sees_the_secret_once(api, project):
    r = api.post(TOKENS, {"label": "my box", "region": "cn-sh", "labels": {"disk": "ssd"}}, format="json")
    assert r.status_code == 201
    body = r.json()
    assert body["token"].startswith("euler_enroll_") and body["platform"] is False and body["trust"] == "untrusted"
    listed = api.get(TOKENS).json()["results"]
    assert [t["id"] for t in listed] == [body["id"]]
    assert "token" not in listed[0] and body["token"] not in str(listed)


def test_a_project_key_cannot_create_a_platform_token(api):
    r = api.post(TOKENS, {"trust": "platform"}, format="json")
    assert r.status_code == 403 and r.json()["code"] == "platform_token_staff_only"


def test_staff_create_platform_tokens_through_their_session(client, make_user, project):
    from quotas.models import Membership

    staff = make_user("root", staff=True)
    Membership.objects.create(user=staff, project=project, role="owner")
    client.force_login(staff)
    r = client.post(TOKENS, {"platform": True, "trust": "platform"}, content_type="application/json")
    assert r.status_code == 201 and r.json()["platform"] is True


@pytest.mark.parametrize(
    "body,code",
    [
        ({"ttl": 10}, "invalid_ttl"),
        ({"ttl": 8 * 86400}, "invalid_ttl"),
        ({"labels": {"bad key": "v"}}, "invalid_labels"),
        ({"region": "a b"}, "invalid_region"),
        ({"privileged": True}, "unknown_field"),
    ],
)
def test_bad_token_requests_get_400_with_a_code(api, body, code):
    r = api.post(TOKENS, body, format="json")
    assert r.status_code == 400 and r.json()["code"] == code


def test_a_project_deletes_its_token_but_another_projects_token_is_404(api, other_api, project):
    tid = api.post(TOKENS, {}, format="json").json()["id"]
    assert other_api.delete(f"{TOKENS}/{tid}").status_code == 404
    assert api.delete(f"{TOKENS}/{tid}").status_code == 204
    assert not EnrollmentToken.objects.exists()


def test_another_projects_tokens_are_not_listed(api, other_api):
    api.post(TOKENS, {}, format="json")
    assert other_api.get(TOKENS).json()["results"] == []


def test_nodes_lists_own_nodes_in_full_and_the_public_pool_as_a_summary(api, project, other_project):
    _node("mine", project=project, labels={"a": "b"})
    _node("theirs-private", project=other_project)
    _node(
        "plat", trust="platform", region="cn-hz", gpus=[{"uuid": "G1", "index": 0, "model": "A10", "memory_bytes": 1}]
    )
    _node("comm", project=other_project, trust="community", public=True, region="cn-hz", cpu=2000)
    _node("off", trust="platform", online=False, region="cn-sh")
    body = api.get("/api/v1/nodes").json()
    assert [n["name"] for n in body["own"]] == ["mine"]
    assert body["own"][0]["labels"] == {"a": "b"}
    pool = body["public_pool"]
    assert pool["nodes"] == 3 and pool["online"] == 2
    assert pool["free_cpu_milli"] == 6000 and pool["free_gpus"] == 1
    assert {r["region"]: r["nodes"] for r in pool["by_region"]} == {"cn-hz": 2, "cn-sh": 1}
    assert pool["by_gpu_model"] == [{"model": "A10", "total": 1, "free": 1}]
    assert "theirs-private" not in str(body)


def test_another_projects_node_is_404(api, other_project, project):
    theirs = _node("theirs", project=other_project)
    mine = _node("mine", project=project)
    assert api.get(f"/api/v1/nodes/{theirs.pk}").status_code == 404
    assert api.get(f"/api/v1/nodes/{mine.pk}").json()["name"] == "mine"


def test_anonymous_callers_get_401_or_403(anon):
    assert anon.get("/api/v1/nodes").status_code in (401, 403)


def test_allocated_resources_reduce_the_free_figures(api):
    node = _node("plat", trust="platform", allocated_cpu_milli=1000)
    services.node_drain(node=node)
    assert api.get("/api/v1/nodes").json()["public_pool"]["free_cpu_milli"] == 0
    services.node_undrain(node=node)
    assert api.get("/api/v1/nodes").json()["public_pool"]["free_cpu_milli"] == 3000
