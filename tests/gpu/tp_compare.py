"""TP=2 against TP=1 for tests/gpu/run.sh's tp section (plain Python: the GPU machine may lack numpy).

    tp_compare.py RUN_TP1.json RUN_TP2.json SCORE_TP1.npy SCORE_TP2.npy TOLERANCE

Prints "greedy N/M equal, logits rel err E" and exits 1 when the greedy ids differ anywhere or
max |a - b| / max |a| over the logits exceeds TOLERANCE (or the shapes differ).
"""
import ast
import json
import struct
import sys


def read_npy_f32(path):
    """(shape, values) of a little-endian float32 .npy (what `sparkserve score --out` writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise SystemExit(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        (hlen,), start = struct.unpack("<H", data[8:10]), 10
    else:
        (hlen,), start = struct.unpack("<I", data[8:12]), 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        raise SystemExit(f"{path}: expected C-order <f4, got {header}")
    shape = tuple(header["shape"])
    count = 1
    for n in shape:
        count *= n
    body = data[start + hlen:]
    return shape, struct.unpack(f"<{count}f", body[:4 * count])


def main():
    run1, run2, npy1, npy2, tol = sys.argv[1:6]
    ids1, ids2 = json.load(open(run1))["ids"], json.load(open(run2))["ids"]
    same = sum(1 for a, b in zip(ids1, ids2) if a == b)
    greedy_ok = ids1 == ids2
    shape1, a = read_npy_f32(npy1)
    shape2, b = read_npy_f32(npy2)
    if shape1 != shape2:
        print(f"greedy {same}/{len(ids1)} equal, logits shape {shape2} != {shape1}")
        return 1
    scale = max(max(abs(x) for x in a), 1e-30)
    err = max(abs(x - y) for x, y in zip(a, b)) / scale
    print(f"greedy {same}/{len(ids1)} equal, logits rel err {err:.3g} (tolerance {tol})")
    return 0 if greedy_ok and err <= float(tol) else 1


if __name__ == "__main__":
    sys.exit(main())
