"""Which GPUs a typed GPU request matches (pure): a model glob over the NVML name and a minimum memory.

Shared by the scheduler (jobs.scheduling) and the prepared device script (scripts/gpu-probe.py), so that the
rule a job is placed by is the rule checked on a real card.

The glob is `fnmatch`, case-insensitive, and must match the whole NVML name, either as NVML writes it or
with a leading "NVIDIA " removed:

- "A100*" matches "NVIDIA A100-SXM4-80GB" and "NVIDIA A100 80GB PCIe";
- "*80GB*" matches "NVIDIA A100-SXM4-80GB" and "NVIDIA H100 80GB HBM3";
- "Tesla V100*" matches "Tesla V100-SXM2-16GB" (older cards carry no "NVIDIA " prefix);
- "A10" matches "NVIDIA A10" only (no wildcard: the whole name), never "NVIDIA A100-…";
- "" (no model) matches every GPU.

Memory is NVML's total in bytes, which is below the size on the box for some cards (an "80GB" H100 reports
79.6 GiB): ask for a little less than the marketing figure, or name the model.
"""

from __future__ import annotations

import fnmatch
import functools
import re

GIB = 1 << 30
MAX_MODEL_CHARS = 128
# Letters, digits, space and the punctuation NVML names use, plus the glob characters * ? [ ] !
MODEL_GLOB = re.compile(r"^[A-Za-z0-9 ._+()/*?\[\]!-]{1,128}$")
PREFIX = "nvidia "


@functools.lru_cache(maxsize=256)
def _compiled(glob: str) -> re.Pattern:
    return re.compile(fnmatch.translate(glob.lower()))


def model_matches(glob: str, name: str) -> bool:
    """Whether the NVML name matches the glob (case-insensitive, whole name, with or without "NVIDIA ")."""
    if not glob:
        return True
    pattern, lowered = _compiled(glob), name.lower()
    if pattern.match(lowered):
        return True
    return lowered.startswith(PREFIX) and bool(pattern.match(lowered[len(PREFIX) :]))


def gpu_matches(model: str, memory_bytes: int, *, glob: str = "", min_memory_bytes: int = 0) -> bool:
    """Whether one GPU (its NVML name and total memory) satisfies a typed request."""
    return memory_bytes >= min_memory_bytes and model_matches(glob, model)


def describe(count: int, glob: str = "", min_memory_bytes: int = 0, *, free: bool = False) -> str:
    """A request in words: "2 GPUs matching A100* with ≥ 40 GiB" ("2 free GPUs …" with `free`)."""
    text = f"{count} {'free ' if free else ''}GPU{'s' if count != 1 else ''}"
    if glob:
        text += f" matching {glob}"
    if min_memory_bytes:
        text += f" with ≥ {min_memory_bytes / GIB:g} GiB"
    return text
