"""The agent's reading of a checkpoint directory from the engine's archive (a fake engine answering a tar): regular
files kept and hashed, links never followed, the shared limits refusing the whole checkpoint at once; and the
archive a restore puts into the container."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from nodeagent import checkpoint
from nodeagent import protocol_checkpoints as pc
from nodeagent.outputs.spool import OutputSpool


class FakeApi:
    """What collect_dir uses of docker's low-level client: one archive answer."""

    def __init__(self, data: bytes):
        self.data = data
        self.asked: list[str] = []

    def _url(self, template, cid):
        return template.format(cid)

    def _get(self, url, params, headers, stream):
        self.asked.append(params["path"])
        return _Response(self.data)

    def _raise_for_status(self, res):
        return None


class _Response:
    def __init__(self, data: bytes):
        self.raw, self.headers = io.BytesIO(data), {}

    def close(self):
        pass


def archive(entries: list[tuple[str, bytes | str | None]]) -> bytes:
    """A tar as the engine sends `/ckpt`: (name, bytes) files, (name, "->target") links, (name, None) dirs."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data[2:]
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def spool(tmp_path):
    return OutputSpool(tmp_path / "spool").attempt(7, part="ckpt").open()


def test_regular_files_are_kept_relative_to_the_directory_and_links_are_not_followed(spool):
    api = FakeApi(archive([("ckpt", None), ("ckpt/step", b"12"), ("ckpt/sub", None), ("ckpt/sub/w", b"abc"),
                           ("ckpt/passwd", "->/etc/passwd")]))  # fmt: skip
    got = checkpoint.collect_dir(api, "cid", "/ckpt", spool, seconds=10)
    assert [(f.path, f.size) for f in got.files] == [("step", 2), ("sub/w", 3)]
    assert got.files[1].sha256 == hashlib.sha256(b"abc").hexdigest() and got.skipped == 1
    with open(spool.path / got.spool_names["sub/w"], "rb") as fh:
        assert fh.read() == b"abc"


def test_a_directory_of_too_many_files_is_refused_whole_at_once(spool):
    entries = [("ckpt", None)] + [(f"ckpt/f{i}", b"") for i in range(pc.MAX_CHECKPOINT_FILES + 5)]
    with pytest.raises(checkpoint.CheckpointRefused, match="more than"):
        checkpoint.collect_dir(FakeApi(archive(entries)), "cid", "/ckpt", spool, seconds=60)


def test_a_directory_past_the_byte_limit_is_refused(spool, monkeypatch):
    monkeypatch.setattr(pc, "MAX_CHECKPOINT_BYTES", 10)
    api = FakeApi(archive([("ckpt/a", b"x" * 6), ("ckpt/b", b"y" * 6)]))
    with pytest.raises(checkpoint.CheckpointRefused, match="more than 10 bytes"):
        checkpoint.collect_dir(api, "cid", "/ckpt", spool, seconds=10)


def test_a_full_spool_refuses_the_checkpoint(tmp_path):
    small = OutputSpool(tmp_path / "s", cap=4).attempt(1, part="ckpt").open()
    with pytest.raises(checkpoint.CheckpointRefused, match="spool"):
        checkpoint.collect_dir(FakeApi(archive([("ckpt/a", b"x" * 6)])), "cid", "/ckpt", small, seconds=10)


class FakeClient:
    def __init__(self, blobs: dict[str, bytes]):
        self.blobs = blobs

    def download(self, url, authenticated=True):
        import contextlib

        data = self.blobs[url]

        @contextlib.contextmanager
        def stream():
            class R:
                def iter_bytes(self, n):
                    yield data

            yield R()

        return stream()


def test_a_restore_archive_places_each_file_under_the_path_and_checks_its_sha256(spool):
    files = [pc.RestoreFile(path=p, size=len(d), sha256=hashlib.sha256(d).hexdigest(), url=p)
             for p, d in (("step", b"5"), ("sub/w", b"abc"), ("empty", b""))]  # fmt: skip
    plan = pc.CheckpointRestore(checkpoint_id=1, seq=3, files=files)
    name = checkpoint._restore_tar(FakeClient({"step": b"5", "sub/w": b"abc", "empty": b""}), "/data/ckpt", plan, spool)
    with open(spool.path / name, "rb") as fh, tarfile.open(fileobj=fh) as tar:
        got = {m.name: (tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()}
    assert got == {"data": None, "data/ckpt": None, "data/ckpt/step": b"5", "data/ckpt/sub": None,
                   "data/ckpt/sub/w": b"abc", "data/ckpt/empty": b""}  # fmt: skip
    bad = pc.CheckpointRestore(checkpoint_id=1, seq=3, files=[files[0]])
    with pytest.raises(checkpoint.RestoreFailed):
        checkpoint._restore_tar(FakeClient({"step": b"6"}), "/ckpt", bad, spool)
