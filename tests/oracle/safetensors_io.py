"""Minimal safetensors reader/writer (pure Python + numpy) for glass tests.

File layout: 8-byte little-endian u64 header length N, then N bytes of JSON
header, then the raw little-endian tensor bytes. The header maps each tensor
name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to
the start of the data section); an optional "__metadata__" entry maps
str -> str.

Supported dtypes: F32, F64, I32, I64, BF16. BF16 is converted to/from float32
by bit shifting (uint16 <-> upper half of the float32 bit pattern); writing
rounds to nearest, ties to even (NaN stays NaN).

API:
    tensors, metadata = read(path)            # dict name -> np.ndarray
    tensors = load(path)                      # same, without metadata
    write(path, tensors, metadata=None, dtypes=None)
        tensors: dict name -> array-like; dtype chosen from the array
        (float32 -> F32, float64 -> F64, int32 -> I32, int64 -> I64)
        unless dtypes[name] is given ("F32", "BF16", ...).
    f32_to_bf16_bits(a) / bf16_bits_to_f32(u16)
"""

import json
import struct

import numpy as np

_NP_DTYPES = {
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
    "BF16": np.dtype("<u2"),  # raw bits; converted to float32 on read
}

_ST_FROM_NP = {
    np.dtype("float32"): "F32",
    np.dtype("float64"): "F64",
    np.dtype("int32"): "I32",
    np.dtype("int64"): "I64",
}


class SafetensorsError(ValueError):
    pass


def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even."""
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    bits = a.view(np.uint32).astype(np.uint64)
    lsb = (bits >> np.uint64(16)) & np.uint64(1)
    rounded = (bits + np.uint64(0x7FFF) + lsb) >> np.uint64(16)
    out = rounded.astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        # keep sign, force a quiet NaN (rounding could otherwise turn a NaN
        # with only low mantissa bits into infinity)
        out[nan] = ((bits[nan] >> np.uint64(16)).astype(np.uint16)
                    | np.uint16(0x7FC0))
    return out


def bf16_bits_to_f32(u):
    """uint16 bf16 bit patterns -> float32 array (exact)."""
    u = np.asarray(u, dtype=np.uint16)
    return (u.astype(np.uint32) << np.uint32(16)).view(np.float32)


def read(path):
    """Read a safetensors file. Returns (dict name -> np.ndarray, metadata dict).

    BF16 tensors are returned as float32. Raises SafetensorsError on malformed
    files."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise SafetensorsError(f"{path}: file too short ({len(blob)} bytes)")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if 8 + hlen > len(blob):
        raise SafetensorsError(
            f"{path}: header length {hlen} exceeds file size {len(blob)}")
    try:
        header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: bad JSON header: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    data = memoryview(blob)[8 + hlen:]
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise SafetensorsError(f"{path}: __metadata__ is not an object")
    tensors = {}
    for name, info in header.items():
        try:
            dtype = info["dtype"]
            shape = [int(s) for s in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(
                f"{path}: tensor {name!r} has a malformed entry: {info!r}") from None
        if dtype not in _NP_DTYPES:
            raise SafetensorsError(
                f"{path}: tensor {name!r} has unsupported dtype {dtype!r}")
        if any(s < 0 for s in shape):
            raise SafetensorsError(f"{path}: tensor {name!r} has negative dim")
        npdt = _NP_DTYPES[dtype]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= begin <= end <= len(data)):
            raise SafetensorsError(
                f"{path}: tensor {name!r} offsets [{begin},{end}) outside data "
                f"section of {len(data)} bytes")
        if end - begin != count * npdt.itemsize:
            raise SafetensorsError(
                f"{path}: tensor {name!r} {dtype}{shape} needs "
                f"{count * npdt.itemsize} bytes, offsets give {end - begin}")
        arr = np.frombuffer(data[begin:end], dtype=npdt).reshape(shape).copy()
        if dtype == "BF16":
            arr = bf16_bits_to_f32(arr)
        else:
            arr = arr.astype(npdt.newbyteorder("="), copy=False)
        tensors[name] = arr
    return tensors, metadata


def load(path):
    return read(path)[0]


def write(path, tensors, metadata=None, dtypes=None):
    """Write tensors (dict name -> array-like) to a safetensors file.

    dtypes: optional dict name -> "F32"/"F64"/"I32"/"I64"/"BF16" to force the
    stored dtype (float data is converted; BF16 rounds to nearest even).
    Tensors are stored in the dict's iteration order."""
    dtypes = dtypes or {}
    header = {}
    chunks = []
    offset = 0
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise SafetensorsError(f"bad tensor name {name!r}")
        arr = np.asarray(value)
        st = dtypes.get(name)
        if st is None:
            st = _ST_FROM_NP.get(arr.dtype)
            if st is None:
                raise SafetensorsError(
                    f"tensor {name!r}: no default safetensors dtype for numpy "
                    f"dtype {arr.dtype}; pass dtypes={{{name!r}: ...}}")
        if st == "BF16":
            raw = f32_to_bf16_bits(arr)
        elif st in _NP_DTYPES:
            raw = np.ascontiguousarray(arr.astype(_NP_DTYPES[st]))
        else:
            raise SafetensorsError(f"tensor {name!r}: unsupported dtype {st!r}")
        b = raw.astype(raw.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": st, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(b)]}
        chunks.append(b)
        offset += len(b)
    if metadata:
        header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()},
                  **header}
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * ((-len(hbytes)) % 8)  # pad so data starts 8-aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for b in chunks:
            f.write(b)
