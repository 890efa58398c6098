"""`euler outputs JOB` (list a job's output files) and `euler download JOB [PATH] [-o DIR]` (fetch them, each
checked against its sha256, with a progress bar on a terminal); `euler checkpoints JOB` (list its checkpoints) and
`euler download --checkpoint JOB [-o DIR]` (the latest one's files, or `--seq N`'s)."""

from __future__ import annotations

import os
import sys
import time

import click

from euler_client.cli.base import json_option, pass_state
from euler_client.cli.output import emit_json, fmt_bytes, fmt_time, note, table

BAR_FROM = 4 * 1024 * 1024  # files at least this large get a progress bar (on a terminal only)


@click.command()
@json_option
@click.argument("job_id", type=int)
@pass_state
def outputs(state, as_json, job_id):
    """List a job's output files (path, size, sha256, created)."""
    listing = state.client().outputs.list(job_id)
    if as_json:
        emit_json(listing)
        return 0
    rows = [[f["path"], fmt_bytes(f["size"]), f["sha256"][:12], fmt_time(f["created_at"])] for f in listing["files"]]
    table(["PATH", "SIZE", "SHA256", "CREATED"], rows)
    if listing.get("outputs_truncated"):
        note(f"outputs truncated: {listing.get('outputs_reason') or 'see the job events (euler jobs show)'}")
    return 0


class _Bar:
    """A one-line progress bar on stderr, redrawn at most ten times a second."""

    def __init__(self, name: str, total: int):
        self.name, self.total, self.drawn, self.started = name, total, 0.0, time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.drawn < 0.1 and done < total:
            return
        self.drawn = now
        share = done / total if total else 1.0
        rate = done / max(now - self.started, 1e-6)
        filled = int(share * 30)
        sys.stderr.write(f"\r{self.name[-40:]:40} [{'#' * filled}{'.' * (30 - filled)}] {share:4.0%} "
                         f"{fmt_bytes(done)}/{fmt_bytes(total)} {fmt_bytes(rate)}/s ")  # fmt: skip
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _target(directory: str, path: str) -> str:
    dest = os.path.normpath(os.path.join(directory, *path.split("/")))
    root = os.path.normpath(directory)
    if os.path.commonpath([os.path.abspath(dest), os.path.abspath(root)]) != os.path.abspath(root):
        raise click.ClickException(f"refusing {path!r}: it would land outside {directory}")
    return dest


@click.command()
@json_option
@click.argument("job_id", type=int)
@pass_state
def checkpoints(state, as_json, job_id):
    """List a job's committed checkpoints, newest first (seq, attempt, reason, size, files, time)."""
    listing = state.client().checkpoints.list(job_id)
    if as_json:
        emit_json(listing)
        return 0
    rows = [[c["seq"], c["attempt"], c["reason"], fmt_bytes(c["size"]), c["files"], fmt_time(c["created_at"])]
            for c in listing["checkpoints"]]  # fmt: skip
    table(["SEQ", "ATTEMPT", "REASON", "SIZE", "FILES", "CREATED"], rows)
    if listing.get("last_refusal"):
        note(f"last refused: {listing['last_refusal']['message']}")
    if not listing.get("declared"):
        note(f"job {job_id} declares no checkpoint")
    return 0


@click.command()
@click.option("-o", "--output-dir", "directory", default=".", show_default=True, help="Where to put the files.")
@click.option("--checkpoint", is_flag=True, help="The job's latest committed checkpoint instead of its outputs.")
@click.option("--seq", type=int, default=None, help="With --checkpoint: this checkpoint (euler checkpoints JOB).")
@json_option
@click.argument("job_id", type=int)
@click.argument("path", required=False)
@pass_state
def download(state, directory, checkpoint, seq, as_json, job_id, path):
    """Download a job's outputs: all, one file (PATH) or one directory (PATH/), each verified by sha256.
    With --checkpoint: the files of its latest checkpoint (or --seq N)."""
    client = state.client()
    if checkpoint:
        done = client.checkpoints.download(job_id, directory, which=str(seq) if seq is not None else "latest")
        if as_json:
            emit_json(done)
        else:
            sys.stdout.writelines(d["file"] + "\n" for d in done)
        return 0
    files = client.outputs.list(job_id)["files"]
    if path:
        prefix = path.rstrip("/") + "/"
        files = [f for f in files if f["path"] == path or f["path"].startswith(prefix)]
        if not files:
            raise click.ClickException(f"job {job_id} has no output {path!r} (euler outputs {job_id})")
    tty = sys.stderr.isatty()
    done = []
    for f in files:
        dest = _target(directory, f["path"])
        bar = _Bar(f["path"], f["size"]) if tty and f["size"] >= BAR_FROM else None
        client.outputs.download(job_id, f, dest, progress=bar)
        done.append({"path": f["path"], "file": dest, "size": f["size"], "sha256": f["sha256"]})
        if not as_json:
            sys.stdout.write(dest + "\n")
    if as_json:
        emit_json(done)
    elif not files:
        note(f"job {job_id} has no outputs")
    return 0
