"""Oracle test: our E2M1 / E4M3FN codecs (quant/e2m1.h, quant/e4m3.h) against ml_dtypes.

A tiny binary (build/tests/quant_codec_dump) prints our decode tables and encodes f32 values we
send it; ml_dtypes (float4_e2m1fn, float8_e4m3fn) gives the expected codes. Producers clamp before
the cast (compressed-tensors: clamp to +-6 / +-448, then round), so the oracle clamps too.
"""
import os
import pathlib
import subprocess

import ml_dtypes
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("SPARKSERVE_BUILD_DIR", ROOT / "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
DUMP = BUILD / "tests" / "quant_codec_dump"


@pytest.fixture(scope="module")
def dump():
    assert DUMP.exists(), f"{DUMP} is missing: build the quant_codec_dump target"

    def run(mode, values=None):
        data = None if values is None else np.asarray(values, np.float32).tobytes()
        out = subprocess.run([str(DUMP), mode], input=data, capture_output=True, check=True).stdout
        return out

    return run


def decoded(dump, mode):
    return np.array([int(l, 16) for l in dump(mode).decode().split()], np.uint32)


def test_e4m3_decode_table_matches_ml_dtypes(dump):
    ours = decoded(dump, "decode-e4m3")
    ref = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert ours.shape == (256,)
    ours_f = ours.view(np.float32)
    np.testing.assert_array_equal(np.isnan(ours_f), np.isnan(ref))
    assert np.isnan(ref).sum() == 2
    finite = ~np.isnan(ref)
    np.testing.assert_array_equal(ours[finite], ref.view(np.uint32)[finite])  # bits: -0.0 included


def test_e2m1_decode_table_matches_ml_dtypes(dump):
    ours = decoded(dump, "decode-e2m1")
    ref = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    np.testing.assert_array_equal(ours, ref.view(np.uint32))


def probe_values(codes_f32, seed):
    """Every representable value, every midpoint, the floats either side of both, plus random
    values spanning the range, a few orders of magnitude outside it, and the specials."""
    v = np.unique(np.abs(codes_f32[np.isfinite(codes_f32)]).astype(np.float64))
    mids = (v[:-1] + v[1:]) / 2
    base = np.concatenate([v, mids]).astype(np.float32)
    near = np.concatenate([base, np.nextafter(base, np.float32(0)), np.nextafter(base, np.float32(np.inf))])
    rng = np.random.default_rng(seed)
    top = float(v.max())
    rand = np.concatenate([
        rng.uniform(0, top * 1.2, 20000),
        np.exp(rng.uniform(np.log(1e-6), np.log(top * 100), 20000)),
    ]).astype(np.float32)
    special = np.array([0.0, 1e-45, 1e-38, 1e30, 3e38, np.inf], np.float32)
    pos = np.concatenate([near, rand, special])
    return np.concatenate([pos, -pos]).astype(np.float32)


def test_e4m3_encode_matches_ml_dtypes(dump):
    table = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    x = probe_values(table, 1)
    ours = np.frombuffer(dump("encode-e4m3", x), np.uint8)
    ref = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    bad = np.nonzero(ours != ref)[0]
    assert bad.size == 0, [(float(x[i]), int(ours[i]), int(ref[i])) for i in bad[:10]]


def test_e4m3_encode_nan_matches_ml_dtypes(dump):
    x = np.array([np.nan, -np.nan], np.float32)
    ours = np.frombuffer(dump("encode-e4m3", x), np.uint8)
    np.testing.assert_array_equal(ours, x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))


def test_e2m1_encode_matches_ml_dtypes(dump):
    table = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    x = probe_values(table, 2)
    ours = np.frombuffer(dump("encode-e2m1", x), np.uint8)
    ref = np.clip(x, -6, 6).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    bad = np.nonzero(ours != ref)[0]
    assert bad.size == 0, [(float(x[i]), int(ours[i]), int(ref[i])) for i in bad[:10]]
