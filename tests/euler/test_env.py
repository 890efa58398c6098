import pytest
from django.core.exceptions import ImproperlyConfigured

from euler.env import env_bool, env_int, env_list, env_secret


def test_a_bad_integer_names_the_variable(monkeypatch):
    monkeypatch.setenv("EULER_X", "ten")
    with pytest.raises(ImproperlyConfigured, match="EULER_X must be an integer"):
        env_int("EULER_X", 1)


def test_an_integer_below_its_minimum_is_refused(monkeypatch):
    monkeypatch.setenv("EULER_X", "-1")
    with pytest.raises(ImproperlyConfigured, match="at least 0"):
        env_int("EULER_X", 1, minimum=0)


def test_a_bad_boolean_names_the_variable(monkeypatch):
    monkeypatch.setenv("EULER_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="EULER_FLAG must be a boolean"):
        env_bool("EULER_FLAG", False)


def test_a_secret_is_read_from_its_file(monkeypatch, tmp_path):
    path = tmp_path / "secret"
    path.write_text("s3cret\n")
    monkeypatch.setenv("EULER_S_FILE", str(path))
    assert env_secret("EULER_S") == "s3cret"


def test_a_secret_set_twice_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("EULER_S", "a")
    monkeypatch.setenv("EULER_S_FILE", str(tmp_path / "x"))
    with pytest.raises(ImproperlyConfigured, match="both set"):
        env_secret("EULER_S")


def test_a_missing_secret_file_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("EULER_S_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="EULER_S_FILE"):
        env_secret("EULER_S")


def test_lists_split_on_commas(monkeypatch):
    monkeypatch.setenv("EULER_L", "a, b,,c")
    assert env_list("EULER_L") == ["a", "b", "c"]


def test_settings_refuse_production_without_a_secret_key(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY_FILE"}}
    env.update(DJANGO_DEBUG="false", EULER_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings")
    out = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True, text=True
    )
    assert out.returncode != 0
    assert "DJANGO_SECRET_KEY is required" in out.stderr
