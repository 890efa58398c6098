"""What an attempt's run calls: inputs between create and start, outputs between the exit and the `ended` report."""

from __future__ import annotations

from nodeagent import protocol
from nodeagent.docker_runner import RunnerError
from nodeagent.logship import Stale
from nodeagent.outputs.collect import collect
from nodeagent.outputs.inputs import InputFailed
from nodeagent.outputs.inputs import place_inputs as place
from nodeagent.outputs.upload import Interrupted, Uploader

NOT_RUN = "the job's container did not run to an end here (never started, or gone): nothing was collected"

__all__ = ["NOT_RUN", "Interrupted", "collect_and_upload", "declared", "not_collected", "place_inputs", "remember"]


def declared(run) -> protocol.OutputSpec | None:
    """The attempt's OutputSpec: from its assignment, or after an agent restart from its record."""
    if run.assignment is not None:
        return run.assignment.outputs
    raw = run.record.get("outputs")
    return protocol.OutputSpec.model_validate(raw) if raw else None


def remember(run) -> None:
    """Keep the OutputSpec in the attempt's record, so that a restarted agent still collects."""
    spec = run.assignment.outputs
    run.record["outputs"] = spec.model_dump() if spec is not None else None


def place_inputs(run, container_id: str) -> None:
    """On the created, not yet started container: the job's input files; RunnerError `start_failed` if one fails."""
    inputs = run.assignment.inputs if run.assignment is not None else []
    if not inputs:
        return
    spool = run.ex.outputs.attempt(run.attempt_id)
    try:
        place(run.ex.client, run.ex.runner.client.api, container_id, inputs, spool)
    except InputFailed as exc:
        raise RunnerError("start_failed", str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the spool's disk, the engine: the start fails, saying why
        run.ex.log.exception("attempt %s: placing its inputs failed", run.attempt_id)
        raise RunnerError("start_failed", f"placing the job's inputs failed: {exc}") from None
    finally:
        spool.remove()


def collect_and_upload(run, container_id: str) -> dict:
    """Collect the stopped container's outputs, upload them: the `ended` report's outputs fields ({} if none).

    Raises Interrupted when the agent closes meanwhile, Stale when the attempt was fenced.
    """
    spec = declared(run)
    if spec is None:
        return {}
    spool = run.ex.outputs.attempt(run.attempt_id)
    cap = min(spec.max_bytes, run.ex.outputs.budget.cap)
    try:
        collected = collect(run.ex.runner.client.api, container_id, spec.model_copy(update={"max_bytes": cap}), spool)
        uploader = Uploader(run.ex.client, run.attempt_id, spool, closing=run.ex.closing)
        outputs, message = uploader.run(collected)
    except (Interrupted, Stale):
        raise
    except Exception as exc:  # noqa: BLE001 - the attempt still ends, saying why its outputs did not
        run.ex.log.exception("attempt %s: outputs failed", run.attempt_id)
        outputs, message = "failed", f"collecting or uploading the outputs failed: {exc}"
    finally:
        spool.remove()
    run.ex.log.info("attempt %s outputs: %s (%s)", run.attempt_id, outputs, message)
    return {"outputs": outputs, "outputs_message": message[:2000]}


def not_collected(run, why: str = NOT_RUN) -> dict:
    """The outputs fields of an attempt that ended without a container to collect from."""
    try:
        spec = declared(run)
    except ValueError:
        spec = None
    return {"outputs": "failed", "outputs_message": why} if spec is not None else {}
