"""`manage.py backup` copies the outputs' filesystem store beside the dump and `restore` puts it back; with a
bucket, neither touches it (the bucket is the operator's)."""

from __future__ import annotations

from euler.backup import backup_outputs, restore_outputs


def test_the_filesystem_store_goes_into_the_backup_and_comes_back(settings, tmp_path):
    store = tmp_path / "store"
    (store / "jobs/1/2").mkdir(parents=True)
    (store / "jobs/1/2/abc").write_bytes(b"model")
    settings.EULER_OUTPUTS_DIR, settings.EULER_OUTPUTS_BUCKET = store, ""
    (tmp_path / "backup").mkdir()
    assert backup_outputs(tmp_path / "backup") == 1
    settings.EULER_OUTPUTS_DIR = tmp_path / "new-store"
    assert restore_outputs(tmp_path / "backup") == 1
    assert (tmp_path / "new-store/jobs/1/2/abc").read_bytes() == b"model"


def test_a_bucket_is_left_to_the_operator(settings, tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store/x").write_bytes(b"x")
    settings.EULER_OUTPUTS_DIR, settings.EULER_OUTPUTS_BUCKET = tmp_path / "store", "bucket"
    assert backup_outputs(tmp_path) == 0 and not (tmp_path / "outputs").exists()
