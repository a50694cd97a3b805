"""The prefix cache on a GPU server (tests/gpu/run.sh, section prefix): the next turn of a ~4K-token
conversation plus a ~100-token user turn, against a server with the cache and one without.

Checks: the resumed first-token logprobs (top 5 of the next turn) are within TOL of the cold
server's, and the greedy replies are equal; reports the next-turn TTFT of both (issue 20's target:
<= 20 ms with the cache against ~130 ms cold on the H200 with the random 4B).
Usage: prefix_ttft.py CACHED_URL COLD_URL [--tol 0.05] [--repeats 5]"""
import argparse
import json
import statistics
import sys
import time

import httpx

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def text(n_words, salt):
    return " ".join(WORDS[(i * 7 + salt) % len(WORDS)] for i in range(n_words))


def stream_chat(url, model, messages, max_tokens, logprobs=False):
    """(reply text, ttft seconds, first-token top logprobs) of a streamed greedy chat completion."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": True}
    if logprobs:
        body.update({"logprobs": True, "top_logprobs": 5})
    t0 = time.perf_counter()
    ttft, reply, top, usage = None, "", None, None
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            for c in chunk.get("choices", []):
                delta = c.get("delta", {})
                piece = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
                lp = c.get("logprobs")
                if ttft is None and (piece or lp):
                    ttft = time.perf_counter() - t0
                if lp and lp.get("content") and top is None:
                    top = {e["token"]: e["logprob"] for e in lp["content"][0]["top_logprobs"]}
                reply += piece
    return reply, ttft, top, usage


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cached")
    ap.add_argument("cold")
    ap.add_argument("--model", default=None)
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    model = a.model or httpx.get(a.cached + "/v1/models").json()["data"][0]["id"]
    ok = True
    ttfts = {"cached": [], "cold": []}
    for rep in range(a.repeats):
        # ~4K tokens of history: a system prompt and 3 earlier turns, each user turn ~1000 tokens.
        messages = [{"role": "system", "content": f"session {rep}: " + text(300, rep)}]
        for turn in range(3):
            messages.append({"role": "user", "content": text(700, 10 * rep + turn)})
            messages.append({"role": "assistant", "content": text(40, 100 + turn)})
        # The conversation so far, once on each server (the cached one keeps it).
        for url in (a.cached, a.cold):
            stream_chat(url, model, messages + [{"role": "user", "content": text(60, 7)}], 16)
        # The earlier request's reply does not matter here: the next turn extends its last complete message.
        messages.append({"role": "user", "content": text(60, 7)})
        messages.append({"role": "assistant", "content": text(30, 9)})
        messages.append({"role": "user", "content": text(70, 11 + rep)})  # ~100 tokens
        got = stream_chat(a.cached, model, messages, 16, logprobs=True)
        want = stream_chat(a.cold, model, messages, 16, logprobs=True)
        ttfts["cached"].append(got[1])
        ttfts["cold"].append(want[1])
        cached_tokens = (got[3] or {}).get("prompt_tokens_details", {}).get("cached_tokens", 0)
        prompt = (got[3] or {}).get("prompt_tokens", 0)
        worst = max((abs(got[2][t] - want[2][t]) for t in want[2] if t in got[2]), default=float("inf"))
        same = got[0] == want[0]
        print(f"repeat {rep}: prompt {prompt} tokens, {cached_tokens} cached; ttft {got[1] * 1e3:.1f} ms cached, "
              f"{want[1] * 1e3:.1f} ms cold; top-5 logprob diff {worst:.4f}; greedy {'equal' if same else 'DIFFERS'}")
        ok &= same and worst <= a.tol and cached_tokens > 0
    med = {k: statistics.median(v) * 1e3 for k, v in ttfts.items()}
    print(f"prefix next-turn ttft: {med['cached']:.1f} ms cached vs {med['cold']:.1f} ms cold (median of {a.repeats})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
