"""Log ingest from node agents: idempotent per (attempt, seq), capped per attempt, broadcast after commit."""

from __future__ import annotations

import io
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from rest_framework.response import Response

from euler import metrics
from euler.env import env_int
from euler.errors import EulerError, InvalidInput
from jobs import fencing
from jobs.broadcast import group_name
from jobs.models import Attempt, LogChunk
from nodeagent import protocol
from nodes.node_api.base import NodeAPIView

log = logging.getLogger(__name__)

# Bytes of log kept per attempt (stored UTF-8); past it one truncation marker is stored and the rest is dropped.
DEFAULT_MAX_LOG_BYTES = env_int("EULER_MAX_LOG_BYTES", 10 * 1024 * 1024, minimum=1024)
TRUNCATION_MARKER = "\n[euler: log truncated: this attempt passed {limit} bytes of output]\n"
GAP_MARKER = "\n[euler: log truncated: {bytes} bytes of output at offset {offset} were refused ({reason})]\n"
# A gap of unknown size (`bytes` 0): output the agent never read, e.g. deleted by the engine log's rotation.
LOST_MARKER = "\n[euler: log truncated: output after offset {offset} was lost: {reason}]\n"


class PayloadTooLarge(EulerError):
    code = "log_chunk_too_large"
    status_code = 413


def max_log_bytes() -> int:
    return int(getattr(settings, "EULER_MAX_LOG_BYTES", DEFAULT_MAX_LOG_BYTES))


def _utf8_prefix(text: str, limit: int) -> str:
    return text.encode()[:limit].decode("utf-8", errors="ignore")


def _read_body(request) -> None:
    """Read the body under the protocol's own limit (not DATA_UPLOAD_MAX_MEMORY_SIZE): 413 past it.

    DRF then parses the body kept here, so Django's global limit never applies to this route.
    """
    limit = protocol.MAX_LOG_REQUEST_BYTES
    too_large = PayloadTooLarge(f"A log request body is at most {limit} bytes.", code="log_batch_too_large")
    length = request.META.get("CONTENT_LENGTH") or "0"
    if length.isdigit() and int(length) > limit:
        raise too_large
    django_request = request._request
    body = django_request.read(limit + 1)
    if len(body) > limit:
        raise too_large
    django_request._body = body
    django_request._stream = io.BytesIO(body)


def _check_sizes(request) -> None:
    data = request.data if isinstance(request.data, dict) else {}
    chunks = data.get("chunks")
    if not isinstance(chunks, list):
        return
    if len(chunks) > protocol.MAX_LOG_BATCH_CHUNKS:
        raise PayloadTooLarge(f"A log batch holds at most {protocol.MAX_LOG_BATCH_CHUNKS} chunks.")
    # A chunk holds MAX_LOG_CHUNK_BYTES of raw output; each raw byte is at most one U+FFFD (3 bytes) here.
    most = 3 * protocol.MAX_LOG_CHUNK_BYTES
    for c in chunks:
        if isinstance(c, dict) and isinstance(c.get("data"), str):
            if len(c["data"].encode("utf-8", errors="surrogatepass")) > most:
                raise PayloadTooLarge(f"A log chunk holds at most {protocol.MAX_LOG_CHUNK_BYTES} bytes of output.")


def _capped(att: Attempt, limit: int) -> bool:
    """The cap marker is stored: nothing more is kept. (A gap alone sets log_truncated below the cap.)"""
    return att.log_truncated and att.log_bytes >= limit


def logs_ingest(*, attempt: Attempt, chunks: list[protocol.LogChunk], gaps: list[protocol.LogGap] = ()) -> dict:
    """Store new chunks and gap markers (duplicates ignored) within the per-attempt cap; publish after commit.

    Output past the cap is cut at exactly the cap, one marker follows, and the reply says `capped` so that
    the agent stops reading; a gap (output the agent could not deliver) stores a marker in its place.
    Either sets `log_truncated`.
    """
    limit = max_log_bytes()
    with transaction.atomic():
        locked = Attempt.objects.select_for_update().only("pk", "job_id", "number", "log_bytes", "log_truncated")
        att = locked.get(pk=attempt.pk)
        wanted: dict[int, protocol.LogChunk | protocol.LogGap] = {}
        for c in [*chunks, *gaps]:
            wanted.setdefault(c.seq, c)
        known = set(LogChunk.objects.filter(attempt_id=att.pk, seq__in=list(wanted)).values_list("seq", flat=True))
        fresh = [wanted[s] for s in sorted(wanted) if s not in known]
        rows, added, truncated, capped = [], 0, att.log_truncated, _capped(att, limit)
        for c in fresh:
            if capped:
                break  # past the cap: dropped (the marker is stored), reported as stored so the agent moves on
            if isinstance(c, protocol.LogGap):
                template = GAP_MARKER if c.bytes else LOST_MARKER
                data = template.format(bytes=c.bytes, offset=c.offset, reason=c.reason or "refused")
                rows.append(LogChunk(attempt_id=att.pk, seq=c.seq, offset=c.offset, stream="stderr", data=data))
                truncated = True
                continue
            # Lone surrogates and NUL cannot be stored in PostgreSQL text: replaced, never a 500.
            data = c.data.encode("utf-8", errors="replace").decode().replace("\x00", "\ufffd")
            size, room = len(data.encode()), limit - att.log_bytes - added
            if size > room:
                data = _utf8_prefix(data, room)
                size = len(data.encode())
                data += TRUNCATION_MARKER.format(limit=limit)
                truncated = capped = True
            rows.append(LogChunk(attempt_id=att.pk, seq=c.seq, offset=c.offset, stream=c.stream, data=data))
            added += size
        if rows:
            LogChunk.objects.bulk_create(rows, ignore_conflicts=True)
            Attempt.objects.filter(pk=att.pk).update(log_bytes=att.log_bytes + added, log_truncated=truncated)
            messages = [
                {
                    "type": "job.log",
                    "attempt_id": att.pk,
                    "attempt": att.number,
                    "seq": r.seq,
                    "stream": r.stream,
                    "data": r.data,
                }
                for r in rows
            ]
            transaction.on_commit(lambda: _publish(att.job_id, messages))
            metrics.inc("euler_log_bytes_total", added)
    last_seq = max(wanted) if wanted else None
    reply = {"stored": len(fresh), "duplicates": len(chunks) + len(gaps) - len(fresh), "last_seq": last_seq}
    if capped:
        reply["capped"] = True
    return reply


def _publish(job_id: int, messages: list[dict]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        for m in messages:
            async_to_sync(layer.group_send)(group_name(job_id), m)
    except Exception:  # noqa: BLE001 - live readers catch up from the database; storing must not fail
        log.warning("publishing log chunks of job %s failed", job_id, exc_info=True)


class AttemptLogsView(NodeAPIView):
    """POST /node-api/v1/attempts/{attempt_id}/logs — a LogBatch; answers a LogReply."""

    body_limit = protocol.MAX_LOG_REQUEST_BYTES  # the node router reads this much (and one byte more) for _read_body

    def post(self, request, attempt_id: int):
        _read_body(request)
        _check_sizes(request)
        batch = self.parse(request, protocol.LogBatch, code="invalid_log_batch")
        if len({c.seq for c in batch.chunks}) != len(batch.chunks) and _conflicting(batch.chunks):
            raise InvalidInput("Two chunks in one batch share a seq with different data.", code="invalid_log_batch")
        attempt = fencing.attempt_for(node=request.node, attempt_id=attempt_id, right=fencing.Right.LOGS)
        return Response(logs_ingest(attempt=attempt, chunks=list(batch.chunks), gaps=list(batch.gaps)))


def _conflicting(chunks) -> bool:
    seen: dict[int, str] = {}
    for c in chunks:
        if seen.setdefault(c.seq, c.data) != c.data:
            return True
    return False
