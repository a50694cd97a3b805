"""Single-threaded encode speed: sparkserve's tokenizer (bench/tokenizer_bench.cc) against Hugging Face
`tokenizers` (TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1, plain encode calls), on the same
~1 MB of generated multilingual documents (tests/golden/tokenizer/tokenizer_corpus.py), in one run:
documents one by one, and all of them as one text. MB/s of UTF-8 input, cold cache and best warm pass.

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


def timed(iters, fn):
    a = time.perf_counter()
    n = fn()
    cold = time.perf_counter() - a
    best = 1e30
    for _ in range(iters):
        a = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - a)
    return n, cold, best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "..", "shared", "fixtures", "qwen3-tokenizer",
                                                        "tokenizer.json"))
    ap.add_argument("--iters", type=int, default=3)
    args = ap.parse_args()

    docs = tokenizer_corpus.corpus()
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".jsonl", delete=False) as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
        path = f.name
    try:
        out = subprocess.run([os.path.join(args.build_dir, "bin", "tokenizer_bench"), args.tokenizer, path,
                              str(args.iters)], check=True, capture_output=True, text=True)
        ours = json.loads(out.stdout)
    finally:
        os.unlink(path)

    text = "".join(docs)
    mb = len(text.encode("utf-8")) / 1e6
    t0 = time.perf_counter()
    hf = Tokenizer.from_file(args.tokenizer)
    load = time.perf_counter() - t0
    doc_tokens, docs_cold, docs_warm = timed(
        args.iters, lambda: sum(len(hf.encode(d, add_special_tokens=False).ids) for d in docs))
    hf = Tokenizer.from_file(args.tokenizer)  # fresh cache for the one-text pass
    text_tokens, text_cold, text_warm = timed(args.iters, lambda: len(hf.encode(text, add_special_tokens=False).ids))
    theirs = {"impl": "hf-tokenizers", "bytes": ours["bytes"], "docs": len(docs), "doc_tokens": doc_tokens,
              "text_tokens": text_tokens, "load_s": round(load, 3), "docs_cold_mb_s": round(mb / docs_cold, 2),
              "docs_warm_mb_s": round(mb / docs_warm, 2), "text_cold_mb_s": round(mb / text_cold, 2),
              "text_warm_mb_s": round(mb / text_warm, 2)}
    print(json.dumps(ours))
    print(json.dumps(theirs))
    if (ours["doc_tokens"], ours["text_tokens"]) != (doc_tokens, text_tokens):
        print("token counts differ", file=sys.stderr)
        return 1
    for key in ("docs_cold_mb_s", "docs_warm_mb_s", "text_cold_mb_s", "text_warm_mb_s"):
        print(f"{key}: {ours[key] / theirs[key]:.1f}x HF")
    return 0


if __name__ == "__main__":
    sys.exit(main())
