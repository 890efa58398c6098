"""Where output bytes live: storages["outputs"], the filesystem or an S3-compatible bucket (django-storages).

The filesystem store takes resumable chunks (append at the offset it holds, verify the sha256 at the end); a
bucket takes one presigned PUT per file that signs `x-amz-checksum-sha256` (S3 refuses a body that does not
match it), and the done call checks the object: its size by HEAD, its sha256 from the checksum S3 reports, or,
where the store reports none (moto, some S3-compatible servers), by reading the object once, streaming.
Reads are streamed in blocks (iter_range): the web process never holds a file in memory.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator

from django.conf import settings
from django.core.files.storage import storages

BLOCK = 256 * 1024


def storage():
    return storages["outputs"]


def is_bucket() -> bool:
    return bool(settings.EULER_OUTPUTS_BUCKET)


def key_for(*, job_id: int, attempt_id: int, file_id: int) -> str:
    """Never the user's path: ids only, so a hostile name cannot reach the store's own naming."""
    return f"jobs/{job_id}/{attempt_id}/{file_id}"


# --- the filesystem store: chunks ------------------------------------------------------------------------------
def _local(key: str) -> str:
    return storage().path(key)


def held(key: str) -> int:
    """Bytes a chunked upload holds so far."""
    try:
        return os.path.getsize(_local(key))
    except FileNotFoundError:
        return 0


def append(key: str, offset: int, data: bytes) -> int:
    """Write `data` at `offset` (the bytes held: the caller checked), dropping anything past it; the new size."""
    path = _local(key)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.ftruncate(fd, offset)
        os.lseek(fd, offset, os.SEEK_SET)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    return offset + len(data)


def reset(key: str) -> None:
    """Forget a chunked upload's bytes (a wrong sha256: the agent starts the file again)."""
    try:
        os.truncate(_local(key), 0)
    except FileNotFoundError:
        pass


def sha256_hex(key: str) -> str:
    digest = hashlib.sha256()
    for block in iter_range(key, 0, None):
        digest.update(block)
    return digest.hexdigest()


# --- the bucket: presigned URLs ----------------------------------------------------------------------------------
def _client():
    return storage().connection.meta.client


def _object_key(key: str) -> str:
    prefix = settings.EULER_OUTPUTS_PREFIX
    return f"{prefix}/{key}" if prefix else key


def presigned_put(key: str, *, sha256: str, size: int) -> tuple[str, dict[str, str]]:
    """A PUT URL for this one object, with the headers the agent must send (signed: S3 checks them)."""
    checksum = base64.b64encode(bytes.fromhex(sha256)).decode()
    params = {
        "Bucket": settings.EULER_OUTPUTS_BUCKET,
        "Key": _object_key(key),
        "ChecksumSHA256": checksum,
        "ContentLength": size,
    }
    url = _client().generate_presigned_url("put_object", Params=params, ExpiresIn=settings.EULER_OUTPUTS_URL_EXPIRY)
    return url, {"x-amz-checksum-sha256": checksum, "Content-Length": str(size)}


def presigned_get(key: str, *, filename: str | None = None) -> str:
    params = {"Bucket": settings.EULER_OUTPUTS_BUCKET, "Key": _object_key(key)}
    if filename:
        params["ResponseContentDisposition"] = f'attachment; filename="{filename}"'
    return _client().generate_presigned_url("get_object", Params=params, ExpiresIn=settings.EULER_OUTPUTS_URL_EXPIRY)


def bucket_check(key: str, *, size: int, sha256: str) -> str:
    """ "" when the stored object is the file the manifest described, else why not."""
    from botocore.exceptions import ClientError

    try:
        head = _client().head_object(Bucket=settings.EULER_OUTPUTS_BUCKET, Key=_object_key(key), ChecksumMode="ENABLED")
    except ClientError:
        return "the object is not in the bucket"
    if head.get("ContentLength") != size:
        return f"the object holds {head.get('ContentLength')} bytes, the manifest says {size}"
    reported = head.get("ChecksumSHA256")
    expected = base64.b64encode(bytes.fromhex(sha256)).decode()
    if reported:
        return "" if reported == expected else "the object's sha256 does not match the manifest"
    return "" if sha256_hex(key) == sha256 else "the object's sha256 does not match the manifest"


# --- both ------------------------------------------------------------------------------------------------------
def iter_range(key: str, start: int, end: int | None) -> Iterator[bytes]:
    """Bytes start..end (inclusive; None: to the end), in blocks of BLOCK, from either store."""
    if is_bucket():
        yield from _bucket_range(key, start, end)
        return
    with open(_local(key), "rb") as fh:
        fh.seek(start)
        left = None if end is None else end - start + 1
        while left is None or left > 0:
            block = fh.read(BLOCK if left is None else min(BLOCK, left))
            if not block:
                return
            if left is not None:
                left -= len(block)
            yield block


def _bucket_range(key: str, start: int, end: int | None) -> Iterator[bytes]:
    params = {"Bucket": settings.EULER_OUTPUTS_BUCKET, "Key": _object_key(key)}
    if start or end is not None:
        params["Range"] = f"bytes={start}-{'' if end is None else end}"
    body = _client().get_object(**params)["Body"]
    try:
        yield from body.iter_chunks(BLOCK)
    finally:
        body.close()


def delete(key: str) -> None:
    """Remove the stored file (the storage adds the bucket's prefix, its `location`, itself)."""
    storage().delete(key)
