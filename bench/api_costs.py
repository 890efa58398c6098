"""What one API request costs on the real platform: at the client and in the web process (`Server-Timing`).

    .venv/bin/python bench/api_costs.py [--runs 40]

Boots the platform as bench/job_latency.py does (uvicorn web, Celery workers and beat, one `./euler-node` agent,
a throw-away SQLite database unless DATABASE_URL names one), runs one `alpine:3.20 true` job to its end, then
times, one at a time with a kept-alive client: `GET /healthz`, `GET /readyz`, `GET /api/v1/jobs/{id}` of that job,
`GET /api/v1/jobs?page_size=1`, and `POST /api/v1/jobs` of a job that waits for a node label nobody has (so no
job runs while they are timed; cancelled after). Prints medians and p90s: at the client, and the web process's
share from `Server-Timing: app;dur=`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
JOB = {"name": "true", "image": "alpine:3.20", "command": ["true"], "network": "none", "cpu_milli": 500,
       "memory_bytes": 256 << 20, "timeout_seconds": 3600}  # fmt: skip


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * len(ordered)) - 1)]


def timed(call, runs: int) -> str:
    took, app = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        response = call()
        took.append(time.perf_counter() - t0)
        app.append(float(response.headers.get("Server-Timing", "app;dur=nan").partition(";dur=")[2]) / 1000)
    return (f"client median {statistics.median(took) * 1000:6.1f} ms p90 {p90(took) * 1000:6.1f} ms;"
            f" web process median {statistics.median(app) * 1000:6.1f} ms p90 {p90(app) * 1000:6.1f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    from job_latency import boot

    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, _ = boot(Path(tmp))
        try:
            job_id = http.post("jobs", json=JOB).json()["id"]
            if http.get(f"jobs/{job_id}/wait", params={"timeout": 25}).json()["state"] != "succeeded":
                raise SystemExit(f"job {job_id} did not succeed within 25 s")
            base = http.base_url.copy_with(path="/")
            waiting: list[int] = []

            def submit():
                r = http.post("jobs", json={**JOB, "node_selector": {"nowhere": "1"}})
                waiting.append(r.json()["id"])
                return r

            rows = {
                "GET /healthz": lambda: http.get(base.join("healthz")),
                "GET /readyz": lambda: http.get(base.join("readyz")),
                "GET /api/v1/jobs/{id}": lambda: http.get(f"jobs/{job_id}"),
                "GET /api/v1/jobs?page_size=1": lambda: http.get("jobs", params={"page_size": 1}),
                "POST /api/v1/jobs (stays queued)": submit,
            }
            for label, call in rows.items():
                print(f"  {label:<34} {timed(call, args.runs)}", flush=True)
            for waiter in waiting:
                http.post(f"jobs/{waiter}/cancel")
        finally:
            http.close()
            platform.stop()


if __name__ == "__main__":
    main()
