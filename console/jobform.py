"""The new-job form in human units (cores, MiB, lines) turned into the API's JSON payload (pure)."""

from __future__ import annotations

import shlex
from decimal import Decimal, InvalidOperation

from django.utils.translation import gettext as _

from console.forms import key_values

MIB = 1024 * 1024
INT_FIELDS = ("gpu_count", "timeout_seconds", "max_retries", "priority")


def _int_or_raw(text: str):
    """An integer when the text is one; otherwise the text itself, so that the API's own check explains."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return text


def _typed_gpus(post, payload: dict) -> None:
    """A GPU model or memory floor makes the request typed: the API's `gpus` object instead of `gpu_count`."""
    model, gib = post.get("gpu_model", "").strip(), post.get("gpu_min_memory_gib", "").strip()
    if not model and not gib:
        return
    typed: dict = {"count": payload.pop("gpu_count", 1) or 1}
    if model:
        typed["model"] = model
    if gib:
        try:
            typed["min_memory_gib"] = float(Decimal(gib))
        except (InvalidOperation, ValueError):
            typed["min_memory_gib"] = gib  # the API's invalid_gpu_memory explains
    payload["gpus"] = typed


def payload_from_form(post) -> tuple[dict, dict[str, str]]:
    """(payload for jobs' JobCreateSerializer, errors found while reading the form), errors keyed by API field."""
    payload: dict = {}
    errors: dict[str, str] = {}
    for field in ("name", "image"):
        payload[field] = post.get(field, "").strip()
    command = post.get("command", "").strip()
    if command:
        try:
            payload["command"] = shlex.split(command)
        except ValueError:
            errors["command"] = _("The command has an unbalanced quote.")
    else:
        payload["command"] = []
    cores = post.get("cpu_cores", "").strip()
    try:
        payload["cpu_milli"] = int(Decimal(cores or "0") * 1000)
    except (InvalidOperation, ValueError):
        errors["cpu_milli"] = _("CPU is a number of cores, like 0.5 or 2.")
    mib = post.get("memory_mib", "").strip()
    try:
        payload["memory_bytes"] = int(Decimal(mib or "0") * MIB)
    except (InvalidOperation, ValueError):
        errors["memory_bytes"] = _("Memory is a number of MiB, like 512.")
    for field in INT_FIELDS:
        if post.get(field, "").strip():
            payload[field] = _int_or_raw(post[field])
    for field in ("region", "pool", "min_trust"):
        if post.get(field, "").strip():
            payload[field] = post[field].strip()
    _typed_gpus(post, payload)
    retry_on = post.getlist("retry_on") if hasattr(post, "getlist") else post.get("retry_on", [])
    payload["retry_on"] = list(retry_on)
    codes = [part.strip() for part in post.get("retry_exit_codes", "").split(",") if part.strip()]
    if codes:  # "75, 128-143": the server checks each (invalid_exit_codes)
        payload["retry_on"].append({"exit_codes": [int(c) if c.isdigit() else c for c in codes]})
    for field in ("env", "node_selector"):
        values, bad = key_values(post.get(field, ""))
        if bad is not None:
            errors[field] = _("Each line is KEY=VALUE; this one is not: %(line)s") % {"line": bad}
        elif values:
            payload[field] = values
    return payload, errors
