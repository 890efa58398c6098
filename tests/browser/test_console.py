"""The console in a real browser: sign-in, keys shown once, invitations, language, admin approval, agents."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


# Every form control has a label (or an aria-label): the console is usable with a screen reader.
UNLABELLED = """() => Array.from(document.querySelectorAll('input:not([type=hidden]), select, textarea'))
  .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby'))
  .map(el => el.name || el.id)"""


def in_thread(fn):
    """Run fn outside this thread, whose event loop belongs to Playwright's sync API."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def run():
        try:
            return fn()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


@pytest.fixture
def olivia(project, owner):
    return owner


def seed_figures(project) -> None:
    """A node with allocations and some usage, so that bars and charts have something to draw."""
    from datetime import timedelta

    from django.utils import timezone

    from nodes.models import Node
    from quotas.models import UsageEntry

    gpus = [{"uuid": f"GPU-{i}", "index": i, "model": "NVIDIA A10", "memory_bytes": 24 << 30} for i in range(4)]
    Node.objects.create(
        name="lab-box", owner_project=project, approval="approved", trust="untrusted", online=True,
        last_heartbeat_at=timezone.now(), cpu_milli=16000, memory_bytes=64 << 30, gpus=gpus,
        allocated_cpu_milli=12000, allocated_memory_bytes=20 << 30, allocated_gpus=["GPU-0", "GPU-1", "GPU-2"],
    )  # fmt: skip
    today = timezone.now().date()
    for days_ago in range(0, 12):
        day = today - timedelta(days=days_ago)
        UsageEntry.objects.create(
            project=project, day=day, resource="cpu_core_seconds", amount=3600 * (days_ago % 5 + 1)
        )
        UsageEntry.objects.create(
            project=project, day=day, resource="invocations", agent_name="echo", amount=40 * days_ago
        )


def test_it_signs_in_and_shows_every_page(site, new_page, olivia, project):
    seed_figures(project)
    page = new_page()
    page.goto(site + "/")
    expect(page).to_have_url(f"{site}/login/?next=/")
    shot(page, "login")
    sign_in(page, site, "olivia", next_path="/")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    expect(page.locator("#tile-nodes")).to_contain_text("1")
    expect(page.locator("#tile-gpus")).to_contain_text("1")
    shot(page, "dashboard")
    for path, heading, name in [
        ("/jobs/", "Jobs", "jobs"),
        ("/jobs/new/", "New job", "job-new"),
        ("/nodes/", "Nodes", "nodes"),
        ("/agents/", "Agents", "agents"),
        ("/keys/", "API keys", "keys"),
        ("/members/", "Members", "members"),
        ("/usage/", "Usage", "usage"),
    ]:
        page.goto(site + path)
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        assert page.evaluate(UNLABELLED) == [], f"inputs without a label on {path}"
        shot(page, name)
    page.goto(site + "/usage/")
    assert page.locator("figure.chart svg").count() >= 2
    page.goto(site + "/nodes/")
    expect(page.locator('tr[data-node="lab-box"]')).to_contain_text("3 / 4")


def test_a_wrong_password_is_refused(site, new_page, olivia):
    page = new_page()
    page.goto(site + "/login/")
    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")


def test_an_api_key_is_shown_once_and_gone_on_reload(site, new_page, olivia):
    page = new_page()
    sign_in(page, site, "olivia")
    page.goto(site + "/keys/")
    page.get_by_label("Label").fill("from the browser")
    page.get_by_role("button", name="Create key").click()
    secret_box = page.locator("[data-once-secret]")
    expect(secret_box).to_contain_text("euler_pk_")
    secret = secret_box.inner_text().strip()
    expect(page.locator("#key-list")).to_contain_text("from the browser")
    shot(page, "keys-created")
    page.get_by_role("button", name="Copy").first.click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()

    assert httpx.get(site + "/api/v1/project", headers={"X-Euler-API-Key": secret}).status_code == 200

    page.reload()
    expect(page.locator("#key-list")).to_contain_text("from the browser")
    assert secret not in page.content()
    assert page.locator("#key-list tbody tr").count() == 1  # the reload created nothing

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke").click()
    expect(page.locator("#key-list")).to_contain_text("revoked")
    assert httpx.get(site + "/api/v1/project", headers={"X-Euler-API-Key": secret}).status_code == 401


def test_an_invited_user_joins_once_and_the_link_refuses_a_second_use(site, new_page, olivia, make_user):
    from quotas.models import Membership

    make_user("carol")
    make_user("dave")
    owner_page = new_page()
    sign_in(owner_page, site, "olivia")
    owner_page.goto(site + "/members/")
    owner_page.get_by_label("Role", exact=True).select_option("member")
    with owner_page.expect_response(lambda r: r.request.method == "POST") as answer:
        owner_page.get_by_role("button", name="Create invitation link").click()
    assert answer.value.status == 200, answer.value.status  # what the server said, should the link not show
    link_box = owner_page.locator("[data-once-secret]")
    expect(link_box).to_contain_text("/join/euler_inv_")
    link = link_box.inner_text().strip()
    path = link[link.index("/join/") :]
    shot(owner_page, "members-invited")
    owner_page.reload()
    assert path not in owner_page.content()

    carol = new_page()
    carol.goto(site + path)
    expect(carol.get_by_text("You are invited to join")).to_be_visible()
    shot(carol, "join")
    carol.get_by_role("link", name="Sign in to join").click()
    carol.get_by_label("Username").fill("carol")
    carol.get_by_label("Password").fill("pw-for-tests")
    carol.get_by_role("button", name="Sign in").click()
    carol.get_by_role("button", name="Join the project").click()
    expect(carol.get_by_role("status")).to_contain_text("You joined alpha.")
    assert Membership.objects.filter(user__username="carol", project__name="alpha").exists()

    dave = new_page()
    sign_in(dave, site, "dave")
    dave.goto(site + path)
    expect(dave.get_by_role("alert")).to_have_text("This invitation link has already been used.")
    shot(dave, "join-used")
    assert not Membership.objects.filter(user__username="dave").exists()

    owner_page.goto(site + "/members/")
    expect(owner_page.locator("#member-list")).to_contain_text("carol")
    expect(owner_page.locator("#invitation-list")).to_contain_text("used")


def test_a_form_sent_in_place_whose_answer_cannot_be_shown_says_so_and_what_to_do(site, new_page, olivia):
    """A secret's form is sent in place (static/console/euler.js); when the answer is not the page it expects (here
    the sign-in page: the session ended in another tab), the form says so instead of staying silent."""
    page = new_page()
    sign_in(page, site, "olivia")
    page.goto(site + "/members/")
    other = page.context.new_page()  # the same browser session, another tab
    other.goto(site + "/")
    other.get_by_role("button", name="Sign out").click()
    other.wait_for_url(lambda url: "/login/" in url)  # LOGOUT_REDIRECT_URL: the session has ended
    page.get_by_role("button", name="Create invitation link").click()
    alert = page.locator("#invite-create [role=alert]")
    expect(alert).to_contain_text("The server did not answer as expected")
    expect(alert).to_contain_text("Reload the page and try again")
    expect(alert).to_contain_text("/login/")  # where the answer led: the sign-in page
    expect(page.locator("[data-once-secret]")).to_have_text("")
    expect(page.get_by_role("button", name="Create invitation link")).to_be_enabled()


def test_the_language_switch_and_the_browser_default(site, new_page, olivia):
    page = new_page()
    sign_in(page, site, "olivia")
    page.get_by_role("button", name="简体中文").click()
    expect(page.get_by_role("heading", name="仪表盘")).to_be_visible()
    expect(page.get_by_role("navigation")).to_contain_text("作业")
    shot(page, "dashboard-zh-hans")
    page.get_by_role("button", name="English").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()

    chinese = new_page(locale="zh-CN")
    chinese.goto(site + "/login/")
    expect(chinese.get_by_role("heading", name="登录欧拉智算")).to_be_visible()
    shot(chinese, "login-zh-hans")


def test_an_operator_approves_a_node_in_the_admin(site, new_page, make_user, project):
    from nodes.models import Node

    make_user("root", staff=True)
    Node.objects.create(
        name="lent-box", owner_project=project, approval="pending", cpu_milli=8000, memory_bytes=16 << 30
    )
    page = new_page()
    sign_in(page, site, "root")
    page.goto(site + "/admin/nodes/node/")
    page.get_by_role("row", name="lent-box").get_by_role("checkbox").check()
    page.locator("select[name=action]").select_option("approve_community")
    page.get_by_role("button", name="Go").click()
    expect(page.locator(".messagelist")).to_contain_text("1 node(s)")
    shot(page, "admin-node-approved")
    node = Node.objects.get(name="lent-box")
    assert node.approval == "approved" and node.trust == "community" and node.public_pool
    assert node.events.filter(kind="approved").exists()


def test_a_registered_agent_shows_its_health(site, new_page, olivia, settings):
    from agents.health import run_checks
    from tests.gateway.servers import ServerThread, Upstream

    settings.EULER_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    upstream = Upstream("browser")
    upstream.server = ServerThread(upstream).start()
    try:
        page = new_page()
        sign_in(page, site, "olivia")
        page.goto(site + "/agents/")
        page.get_by_label("Name", exact=True).fill("echo")
        page.get_by_label("Instance base URLs (one per line)").fill(upstream.server.url)
        page.get_by_role("button", name="Register agent").click()
        expect(page).to_have_url(f"{site}/agents/echo/")
        expect(page.locator("#instances")).to_contain_text("unknown")
        assert in_thread(run_checks) == 1  # what beat does every few seconds
        expect(page.locator("#instances .health")).to_have_text("healthy")  # the region refreshes itself
        shot(page, "agent-detail")
    finally:
        upstream.server.stop()


def test_the_new_job_form_shows_the_apis_validation_next_to_the_field(site, new_page, olivia):
    page = new_page()
    sign_in(page, site, "olivia")
    page.goto(site + "/jobs/new/")
    page.get_by_label("Name", exact=True).fill("bad")
    page.get_by_label("Image").fill("Not An Image!")
    page.get_by_label("Command (shell-style words, no shell runs it)").fill("echo hi")
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#err-image")).to_contain_text("not a valid image reference")
    expect(page.get_by_label("Image")).to_have_attribute("aria-invalid", "true")
    shot(page, "job-new-errors")


def test_an_enrollment_token_and_its_command_are_shown_once(site, new_page, olivia):
    page = new_page()
    sign_in(page, site, "olivia")
    page.goto(site + "/nodes/")
    page.get_by_label("Label").fill("lab")
    page.get_by_role("button", name="Create enrollment token").click()
    expect(page.locator("[data-once-secret]")).to_contain_text("euler_enroll_")
    token = page.locator("[data-once-secret]").inner_text().strip()
    command = page.locator("#once-command").inner_text()
    assert f"EULER_ENROLLMENT_TOKEN={token}" in command and command.endswith("./euler-node")
    expect(page.locator("#token-list")).to_contain_text("lab")
    shot(page, "nodes-token-created")
    page.reload()
    assert token not in page.content()


def test_a_key_can_be_created_with_the_keyboard_alone(site, new_page, olivia):
    page = new_page()
    sign_in(page, site, "olivia")
    page.goto(site + "/keys/")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.get_by_label("Label").focus()
    page.keyboard.type("typed")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Create key")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("[data-once-secret]")).to_contain_text("euler_pk_")
    expect(page.locator("[data-once-output]")).to_be_focused()


def test_an_invitation_link_survives_the_oidc_sign_in(site, new_page, olivia, oidc):
    """A newcomer opens the link, signs in with the provider (first login), lands back on it and joins."""
    import httpx as client

    from quotas.invitations import invitation_create
    from quotas.models import Membership

    client.put(f"{oidc}/users/erin-sub", json={"email": "erin@example.com", "preferred_username": "erin"})
    link = invitation_create(project=olivia.memberships.get().project).url
    path = link[link.index("/join/") :]
    page = new_page()
    page.goto(site + path)
    page.get_by_role("link", name="Sign in to join").click()
    oidc_button = page.locator("#oidc-login")
    expect(oidc_button).to_have_text("E时代通行证")
    expect(page.get_by_label("Password")).to_have_count(0)
    shot(page, "login-oidc")
    oidc_button.click()
    page.locator("input[name=sub]").fill("erin-sub")
    page.locator("form [type=submit]").first.click()
    page.wait_for_url(f"{site}{path}")
    page.get_by_role("button", name="Join the project").click()
    expect(page.get_by_role("status")).to_contain_text("You joined alpha.")
    assert Membership.objects.filter(user__username="erin", project__name="alpha").exists()
