import os

from nodeagent import state


def test_the_credential_is_kept_with_mode_0600_in_a_0700_dir(tmp_path):
    d = tmp_path / "st"
    state.save_enrollment(d, credential="euler_node_abc", node_id=3, name="n1", url="https://e")
    assert (d / "credential").stat().st_mode & 0o777 == 0o600
    assert d.stat().st_mode & 0o777 == 0o700
    assert state.load_credential(d) == "euler_node_abc"
    assert state.load_node(d) == {"node_id": 3, "name": "n1", "url": "https://e"}


def test_a_loosened_credential_file_is_tightened_on_load(tmp_path):
    state.save_enrollment(tmp_path, credential="euler_node_abc", node_id=1, name="n", url="u")
    os.chmod(tmp_path / "credential", 0o644)
    assert state.load_credential(tmp_path) == "euler_node_abc"
    assert (tmp_path / "credential").stat().st_mode & 0o777 == 0o600


def test_no_state_means_no_credential(tmp_path):
    assert state.load_credential(tmp_path) is None and state.load_node(tmp_path) == {}
