"""Finding a model's tensors, and saving them in the safetensors format.

get_state_dict walks an object's attributes (then lists, tuples and dicts inside them) in
insertion order, so the names are dotted paths like `blocks.0.attn.c_attn.weight` and the order
is the same every run. safetensors is a flat file: 8 bytes (little-endian u64) giving the length
of a JSON header that maps each name to its dtype, shape and [begin, end) byte range in the data
that follows. Loading a file therefore never runs code (no pickle). numpy is only the door in and
out of bytes here.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from pathlib import Path

import numpy as np

from ..dtype import dtypes
from ..tensor import Tensor

_CODES = {dtypes.float32: "F32", dtypes.float64: "F64", dtypes.int32: "I32", dtypes.int64: "I64",
          dtypes.bool: "BOOL"}
_BY_CODE = {code: dt for dt, code in _CODES.items()}


def get_state_dict(obj, prefix: str = "", _path: frozenset = frozenset()) -> dict[str, Tensor]:
    """Every tensor reachable from obj, by dotted name; tied tensors appear under each name.
    An object that refers back to one that contains it (a parent link) is not walked again."""
    if isinstance(obj, Tensor):
        return {prefix.rstrip("."): obj}
    if id(obj) in _path:
        return {}
    _path = _path | {id(obj)}
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        items = vars(obj).items()
    else:
        return {}
    out: dict[str, Tensor] = {}
    for name, value in items:
        out.update(get_state_dict(value, f"{prefix}{name}.", _path))
    return out


def get_parameters(obj) -> list[Tensor]:
    """The trainable tensors of obj, each once even when tied under two names: float tensors whose
    requires_grad is not False (None counts as trainable, as in tinygrad; running statistics are False)."""
    seen, params = set(), []
    for t in get_state_dict(obj).values():
        if t.dtype.is_float and t.requires_grad is not False and id(t) not in seen:
            seen.add(id(t))
            params.append(t)
    return params


def load_state_dict(obj, state_dict: dict[str, Tensor], strict: bool = True) -> None:
    """Copy values into obj's tensors in place (their identity, and optimizers holding them, stay)."""
    own = get_state_dict(obj)
    if strict:
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if missing or unexpected:
            raise ValueError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
    for name, t in own.items():
        if name not in state_dict:
            continue
        v = state_dict[name]
        if tuple(v.shape) != t.shape:
            raise ValueError(f"load_state_dict: {name!r} has shape {tuple(v.shape)}, expected {t.shape}")
        if v.dtype is not t.dtype:
            raise ValueError(f"load_state_dict: {name!r} has dtype {v.dtype.name}, expected {t.dtype.name}")
        with Tensor.no_grad():
            t.assign(v)


def safe_save(state_dict: dict[str, Tensor], path, metadata: dict[str, str] | None = None) -> None:
    """Write a safetensors file. Atomic: the bytes go to a temp file in the same folder, which is then
    renamed over `path`, so a crash never leaves half a checkpoint."""
    header: dict = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("safe_save: __metadata__ must map str to str")
        header["__metadata__"] = dict(metadata)
    blobs, offset = [], 0
    for name, t in state_dict.items():
        if t.dtype not in _CODES:
            raise TypeError(f"safe_save: {name!r} has unsupported dtype {t.dtype.name}")
        data = t.numpy().astype(t.dtype.np.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the reference writer does
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for blob in blobs:
                f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_header(raw: bytes, path) -> tuple[dict, int]:
    if len(raw) < 8:
        raise ValueError(f"safe_load: {path} is too short to be a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"safe_load: {path}: header length {n} runs past the end of the file")
    try:
        header = json.loads(raw[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"safe_load: {path}: the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"safe_load: {path}: the header must be a JSON object")
    return header, 8 + n


def safe_load_metadata(path) -> dict[str, str]:
    header, _ = _read_header(Path(path).read_bytes(), path)
    return dict(header.get("__metadata__", {}))


def safe_load(path) -> dict[str, Tensor]:
    """Read a safetensors file into tensors, checking every entry's dtype, shape and byte range."""
    raw = Path(path).read_bytes()
    header, start = _read_header(raw, path)
    out: dict[str, Tensor] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = _BY_CODE.get(info.get("dtype"))
        if dt is None:
            raise ValueError(f"safe_load: {path}: {name!r} has unsupported dtype {info.get('dtype')!r}")
        shape = tuple(int(n) for n in info["shape"])
        begin, end = info["data_offsets"]
        count = 1
        for n in shape:
            count *= n
        if not 0 <= begin <= end <= len(raw) - start or end - begin != count * dt.itemsize:
            raise ValueError(f"safe_load: {path}: {name!r} byte range {[begin, end]} does not hold "
                             f"{shape} of {dt.name} inside the file")
        arr = np.frombuffer(raw, dtype=dt.np.newbyteorder("<"), count=count, offset=start + begin)
        out[name] = Tensor(arr.astype(dt.np).reshape(shape), dtype=dt)
    return out
