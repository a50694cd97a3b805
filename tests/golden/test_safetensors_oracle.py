"""Oracle test: our safetensors writer/reader (quant/safetensors_*.h) against the `safetensors`
library. Files we write must load in the library with the same names, dtypes, shapes, bytes and
metadata; files the library writes must load in ours. A small tool (build/tests/quant_safetensors_tool)
drives our side.
"""
import json
import os
import pathlib
import subprocess

import ml_dtypes
import numpy as np
import pytest
import safetensors

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("SPARKSERVE_BUILD_DIR", ROOT / "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
TOOL = BUILD / "tests" / "quant_safetensors_tool"

# The tool's sample set: (name, dtype, shape); tensor k has byte i = (7 i + 13 k + 1) mod 256.
SAMPLE = [
    ("a.f32", "F32", [3, 5]), ("b.bf16", "BF16", [4, 3]), ("c.u8", "U8", [7]), ("d.fp8", "F8_E4M3", [2, 3]),
    ("e.i64", "I64", [2]), ("f.f16", "F16", [3]), ("g.i32", "I32", [1, 1, 2]), ("h.scalar", "F32", []),
    ("i.empty", "F32", [0, 4]),
]
SIZE = {"F32": 4, "BF16": 2, "U8": 1, "F8_E4M3": 1, "I64": 8, "F16": 2, "I32": 4}


def sample_bytes(k, dtype, shape):
    n = int(np.prod(shape, dtype=np.int64)) * SIZE[dtype]
    return bytes(((7 * np.arange(n) + 13 * k + 1) % 256).astype(np.uint8))


def tool(*args, check=True):
    assert TOOL.exists(), f"{TOOL} is missing: build the quant_safetensors_tool target"
    r = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def library_read(path):
    data = pathlib.Path(path).read_bytes()
    with safetensors.safe_open(str(path), framework="numpy") as f:
        metadata = f.metadata()
    return {name: info for name, info in safetensors.deserialize(data)}, metadata


def test_our_file_loads_in_the_library(tmp_path):
    path = tmp_path / "ours.safetensors"
    tool("write", path)
    tensors, metadata = library_read(path)
    assert metadata == {"format": "pt", "origin": "sparkserve"}
    assert set(tensors) == {n for n, _, _ in SAMPLE}
    for k, (name, dtype, shape) in enumerate(SAMPLE):
        assert tensors[name]["dtype"] == dtype, name
        assert list(tensors[name]["shape"]) == shape, name
        assert bytes(tensors[name]["data"]) == sample_bytes(k, dtype, shape), name


def test_our_shards_load_in_the_library(tmp_path):
    tool("write-sharded", tmp_path, 64)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 2
    seen = {}
    for shard in shards:
        tensors, metadata = library_read(tmp_path / shard)
        assert metadata == {"format": "pt", "origin": "sparkserve"}
        for name, info in tensors.items():
            assert index["weight_map"][name] == shard
            assert name not in seen
            seen[name] = info
    assert index["metadata"]["total_size"] == sum(len(sample_bytes(k, d, s)) for k, (_, d, s) in enumerate(SAMPLE))
    for k, (name, dtype, shape) in enumerate(SAMPLE):
        assert seen[name]["dtype"] == dtype and list(seen[name]["shape"]) == shape
        assert bytes(seen[name]["data"]) == sample_bytes(k, dtype, shape), name


def library_tensors(seed):
    rng = np.random.default_rng(seed)
    arrays = {
        "model.layers.0.mlp.down_proj.weight": rng.standard_normal((6, 8)).astype(ml_dtypes.bfloat16),
        "model.layers.0.mlp.down_proj.weight_scale": rng.standard_normal((6, 1)).astype(np.float32),
        "fp8.weight": rng.standard_normal((4, 4)).astype(ml_dtypes.float8_e4m3fn),
        "packed": rng.integers(0, 256, (3, 5), dtype=np.uint8),
        "half": rng.standard_normal(5).astype(np.float16),
        "ids": np.arange(3, dtype=np.int64),
        "count": np.array(7, dtype=np.int32),
    }
    dtypes = {ml_dtypes.bfloat16: "BF16", ml_dtypes.float8_e4m3fn: "F8_E4M3", np.uint8: "U8", np.float16: "F16",
              np.int64: "I64", np.int32: "I32", np.float32: "F32"}
    return {n: (a, dtypes[a.dtype.type]) for n, a in arrays.items()}


# TensorSpec takes constructor-style dtype names; the header stores the format codes.
SPEC_DTYPE = {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "U8": "uint8", "F16": "float16", "I64": "int64",
              "I32": "int32", "F32": "float32"}


def library_write(path, tensors, metadata):
    specs = {n: safetensors.TensorSpec(dtype=SPEC_DTYPE[d], shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
             for n, (a, d) in tensors.items()}
    safetensors.serialize_file(specs, str(path), metadata=metadata)


def check_dump(dump, tensors):
    assert set(dump["tensors"]) == set(tensors)
    for name, (a, d) in tensors.items():
        got = dump["tensors"][name]
        assert got["dtype"] == d, name
        assert got["shape"] == list(a.shape), name
        assert got["hex"] == a.tobytes().hex(), name


def test_library_file_loads_in_ours(tmp_path):
    tensors = library_tensors(0)
    path = tmp_path / "theirs.safetensors"
    library_write(path, tensors, {"format": "pt", "k": "v"})
    dump = json.loads(tool("dump", path).stdout)
    assert dump["metadata"] == {"format": "pt", "k": "v"}
    check_dump(dump, tensors)


def test_library_shards_with_an_index_load_in_ours(tmp_path):
    tensors = library_tensors(1)
    names = sorted(tensors)
    groups = [names[:3], names[3:5], names[5:]]
    weight_map = {}
    for i, group in enumerate(groups):
        shard = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        library_write(tmp_path / shard, {n: tensors[n] for n in group}, {"format": "pt"})
        weight_map.update({n: shard for n in group})
    total = sum(a.nbytes for a, _ in tensors.values())
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    check_dump(json.loads(tool("dump", tmp_path).stdout), tensors)


def test_truncated_library_file_is_a_clear_error(tmp_path):
    path = tmp_path / "cut.safetensors"
    library_write(path, library_tensors(2), None)
    data = path.read_bytes()
    path.write_bytes(data[:-3])
    r = tool("dump", path, check=False)
    assert r.returncode != 0 and r.stdout == ""
    assert "cut.safetensors" in r.stderr and "data section" in r.stderr
