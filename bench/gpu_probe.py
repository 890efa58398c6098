"""The prepared device check (issue 26): the agent's own GPU code against a real NVIDIA driver, as JSON.

Run it on a machine with an NVIDIA GPU, from a checkout, with only the node agent's packages installed
(requirements-runtime.txt: pydantic, psutil, docker, nvidia-ml-py); no database, no server, no Docker needed:

    python bench/gpu_probe.py                       # every check; exit 0 when all pass
    python bench/gpu_probe.py --model 'H100*' --min-memory-gib 79
    python bench/gpu_probe.py --run-image nvidia/cuda:12.4.1-base-ubuntu22.04   # also start a container on GPU 0

It checks, and prints with the time each took:
1. probe: nodeagent.probe.GpuProbe over the real NVML (UUID, index, NVML name, memory);
2. device_request: nodeagent.containers.create_kwargs for an assignment pinned to GPU 0 by UUID;
3. typed_match: nodeagent.gpumatch (the scheduler's rule) for a glob and a memory floor, expected to match
   GPU 0 and to refuse a floor 1 GiB above its memory; --model/--min-memory-gib add the request you give;
4. health: nodeagent.gpuhealth registers for XID events, waits for one briefly, reads the ECC counters;
5. stats: nodeagent.gpustats samples GPU 0 (utilisation, memory, per process or per device);
6. with --run-image: the DeviceRequest through the engine, `nvidia-smi -L` in the container names GPU 0's UUID.
The JSON goes to stdout (paste it into BENCHMARKS.md with the date); `ok` is false when any check failed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's nodeagent, run from anywhere

from nodeagent import containers, gpumatch, protocol  # noqa: E402
from nodeagent.gpuhealth import GpuHealth  # noqa: E402
from nodeagent.gpustats import GpuStats  # noqa: E402
from nodeagent.probe import GpuProbe  # noqa: E402

GIB = 1 << 30


class Checks:
    def __init__(self) -> None:
        self.results: list[dict] = []

    def run(self, name: str, fn):
        started = time.perf_counter()
        try:
            detail = fn()
            ok = True
        except Exception as exc:  # noqa: BLE001 - every check reports, whatever it raised
            detail, ok = f"{type(exc).__name__}: {exc}", False
        self.results.append({"check": name, "ok": ok, "ms": round((time.perf_counter() - started) * 1000, 1),
                             "detail": detail})  # fmt: skip
        return detail if ok else None


def glob_for(name: str) -> str:
    """A glob a user would write for this card: its name without "NVIDIA ", up to the first space or dash, then *."""
    short = name[len("NVIDIA ") :] if name.lower().startswith("nvidia ") else name
    return short.replace("-", " ").split(" ")[0] + "*"


def main(argv: list[str] | None = None, nvml=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a model glob to match as well (e.g. 'A100*')")
    parser.add_argument("--min-memory-gib", type=float, default=0.0)
    parser.add_argument("--run-image", help="an image with nvidia-smi: start it on GPU 0 through Docker")
    args = parser.parse_args(argv)
    checks = Checks()
    gpu_probe = GpuProbe(nvml)

    def probe():
        gpus = gpu_probe.gpus()
        assert gpu_probe.available, "NVML did not initialise (no driver, or nvidia-ml-py missing)"
        assert gpus, "NVML answered but found no GPU"
        for g in gpus:
            assert g.uuid.startswith(("GPU-", "MIG-")) and g.memory_bytes > 0 and g.model, g
        return [g.model_dump() for g in gpus]

    gpus = checks.run("probe", probe) or []
    first = protocol.GpuInfo.model_validate(gpus[0]) if gpus else None

    if first is not None:

        def device_request():
            a = protocol.Assignment(attempt_id=1, job_id=1, attempt_number=1, image="busybox", command=["true"],
                                    cpu_milli=500, memory_bytes=64 << 20, gpu_uuids=[first.uuid], timeout_seconds=60)  # fmt: skip
            (req,) = containers.create_kwargs(a, node_name="gpu-probe")["device_requests"]
            assert req["DeviceIDs"] == [first.uuid] and req["Capabilities"] == [["gpu"]], dict(req)
            return dict(req)

        checks.run("device_request", device_request)

        def typed_match():
            glob, floor = glob_for(first.model), first.memory_bytes // GIB * GIB
            out = {"gpu0": first.model, "glob": glob, "floor_gib": floor // GIB}
            assert gpumatch.gpu_matches(first.model, first.memory_bytes, glob=glob, min_memory_bytes=floor), out
            assert gpumatch.gpu_matches(first.model, first.memory_bytes, glob=first.model.lower()), "whole name"
            assert not gpumatch.gpu_matches(first.model, first.memory_bytes, min_memory_bytes=floor + GIB), out
            if args.model or args.min_memory_gib:
                asked = {"glob": args.model or "", "min_memory_bytes": int(args.min_memory_gib * GIB)}
                out["asked"] = {**asked, "matches": [g["uuid"] for g in gpus
                                                     if gpumatch.gpu_matches(g["model"], g["memory_bytes"], **asked)]}  # fmt: skip
            return out

        checks.run("typed_match", typed_match)

        def health():
            h = GpuHealth(gpu_probe.nvml)
            h.open()
            h.wait_events(200)
            h.check()
            return {"registered": h._events is not None, "marks": dict(h.marks)}

        checks.run("health", health)

        def stats():
            s = GpuStats(gpu_probe.nvml)
            s.start(1, [first.uuid])
            time.sleep(0.2)
            s.sample()
            (stat,) = s.finish(1)
            assert stat.samples >= 2, stat
            return stat.model_dump()

        checks.run("stats", stats)

        if args.run_image:

            def run_container():
                import docker

                client = docker.from_env()
                req = docker.types.DeviceRequest(device_ids=[first.uuid], capabilities=[["gpu"]])
                out = client.containers.run(args.run_image, ["nvidia-smi", "-L"], device_requests=[req], remove=True)
                text = out.decode(errors="replace")
                assert first.uuid in text, text
                return text.strip()

            checks.run("container", run_container)

    ok = bool(checks.results) and all(r["ok"] for r in checks.results)
    report = {"ok": ok, "host": platform.node(), "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d", time.gmtime()), "checks": checks.results}  # fmt: skip
    json.dump(report, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
