"""A `docker save` archive (docker-archive: manifest.json, the config, one `<hex>/layer.tar` per layer) written as
a stream of bytes, so that `docker load` reads the blobs as they arrive and nothing is spooled by the agent.

Every engine that speaks Docker's API loads this format (Docker 1.10 on, Podman); layers stay as the registry
compressed them (the engine decompresses) and the engine checks each one against the config's `diff_ids`.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable, Iterable, Iterator

from nodeagent.registry.manifest import Blob, Image

BLOCK = 512


def _header(name: str, size: int, *, directory: bool = False) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = 0 if directory else size
    info.mode = 0o755 if directory else 0o644
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    return info.tobuf(format=tarfile.PAX_FORMAT)  # PAX: sizes past 8 GiB


def _pad(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


def _file(name: str, data: bytes) -> bytes:
    return _header(name, len(data)) + data + _pad(len(data))


def entries(image: Image, config: bytes, tag: str) -> list[dict]:
    """manifest.json's one entry: the config, the tag the engine gives the image, the layers in order."""
    return [
        {
            "Config": f"{image.config.hex}.json",
            "RepoTags": [tag],
            "Layers": [f"{layer.hex}/layer.tar" for layer in image.layers],
        }
    ]


def stream(image: Image, config: bytes, tag: str, blob: Callable[[Blob], Iterable[bytes]]) -> Iterator[bytes]:
    """The archive's bytes; `blob(b)` yields a layer's bytes, checked against its digest and size."""
    done: set[str] = set()
    for layer in image.layers:
        if layer.digest in done:
            continue  # a layer listed twice is one file
        done.add(layer.digest)
        yield _header(f"{layer.hex}/", 0, directory=True) + _header(f"{layer.hex}/layer.tar", layer.size)
        yield from blob(layer)
        yield _pad(layer.size)
    yield _file(f"{image.config.hex}.json", config)
    yield _file("manifest.json", json.dumps(entries(image, config, tag)).encode())
    yield b"\0" * (2 * BLOCK)
