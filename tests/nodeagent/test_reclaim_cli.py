"""`euler-node reclaim [--grace S]` / `euler-node resume` (nodeagent/reclaim_cli.py): what it sends and says."""

from __future__ import annotations

from nodeagent import reclaim_cli


def test_reclaim_sends_its_grace_only_when_given():
    assert reclaim_cli.body_for(reclaim_cli.parse(["reclaim", "--grace", "30"])) == {"grace": 30}
    assert reclaim_cli.body_for(reclaim_cli.parse(["reclaim"])) == {}
    assert reclaim_cli.body_for(reclaim_cli.parse(["resume"])) == {}


def test_it_says_what_happened_in_one_line():
    assert reclaim_cli.describe({"name": "box", "stopped": 2}, "reclaim").startswith("box reclaimed: 2 running jobs")
    assert reclaim_cli.describe({"name": "box", "reclaimed": False}, "resume") == "box accepts jobs again"
    still = reclaim_cli.describe({"name": "box", "reclaimed": True, "reclaimed_by": "lender"}, "resume")
    assert "still reclaimed" in still and "lender" in still


def test_without_a_credential_it_asks_to_enroll_first(tmp_path, capsys):
    env = {"EULER_CONTROL_PLANE_URL": "http://127.0.0.1:9", "EULER_NODE_STATE_DIR": str(tmp_path)}
    assert reclaim_cli.main(["reclaim"], env) == reclaim_cli.EXIT_CONFIG
    assert "enroll" in capsys.readouterr().err


def test_an_unreachable_control_plane_exits_2(tmp_path, capsys):
    from nodeagent import state

    state.save_enrollment(tmp_path, credential="euler_node_x", node_id=1, name="box", url="http://127.0.0.1:9")
    env = {"EULER_CONTROL_PLANE_URL": "http://127.0.0.1:9", "EULER_NODE_STATE_DIR": str(tmp_path)}
    assert reclaim_cli.main(["resume"], env) == reclaim_cli.EXIT_UNREACHABLE
    assert "did not answer" in capsys.readouterr().err
