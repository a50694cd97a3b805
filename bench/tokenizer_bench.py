"""Single-threaded encode speed: sparkserve's tokenizer (bench/tokenizer_bench.cc) against Hugging Face
`tokenizers`, on the same ~1 MB generated multilingual text, in one run.

  build/venv/bin/python bench/tokenizer_bench.py [--build-dir build] [--tokenizer PATH] [--iters N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "golden", "tokenizer"))
import tokenizer_corpus  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "..", "shared", "fixtures", "qwen3-tokenizer",
                                                        "tokenizer.json"))
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()

    text = "".join(tokenizer_corpus.corpus())
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        out = subprocess.run([os.path.join(args.build_dir, "bin", "tokenizer_bench"), args.tokenizer, path,
                              str(args.iters)], check=True, capture_output=True, text=True)
        ours = json.loads(out.stdout)
    finally:
        os.unlink(path)

    t0 = time.perf_counter()
    hf = Tokenizer.from_file(args.tokenizer)
    t1 = time.perf_counter()
    ids = hf.encode(text, add_special_tokens=False).ids
    t2 = time.perf_counter()
    best = 1e30
    for _ in range(args.iters):
        a = time.perf_counter()
        hf.encode(text, add_special_tokens=False)
        best = min(best, time.perf_counter() - a)
    mb = len(text.encode("utf-8")) / 1e6
    theirs = {"impl": "hf-tokenizers", "bytes": len(text.encode("utf-8")), "tokens": len(ids), "load_s": t1 - t0,
              "cold_s": t2 - t1, "warm_s": best, "cold_mb_per_s": mb / (t2 - t1), "warm_mb_per_s": mb / best}
    print(json.dumps(ours))
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in theirs.items()}))
    if ours["tokens"] != theirs["tokens"]:
        print(f"token counts differ: {ours['tokens']} vs {theirs['tokens']}", file=sys.stderr)
        return 1
    print(f"speed-up (warm): {theirs['warm_s'] / ours['warm_s']:.2f}x, (cold): {theirs['cold_s'] / ours['cold_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
