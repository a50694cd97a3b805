"""Speculative decoding end to end (CPU): `run --spec mtp|ngram --spec-tokens 1..5` gives `--spec off`'s
greedy ids on every golden fixture and reports what it drafted; a server with speculation answers 8
concurrent users exactly as one without and counts drafts under vLLM's metric names."""
import concurrent.futures
import json
import os
import subprocess

import httpx
import pytest

from conftest import API_KEY, BACKEND, MODEL_NAME, REPO, RUNNER_FLAGS, SPARKSERVE, Server

GOLDEN = os.path.join(REPO, "tests", "golden", "qwen35")
FIXTURES = ["text_tied", "text_untied", "vl_tied", "vl_untied"]
# The CUDA backend verifies n-gram drafts only so far (tests/gpu/run.sh, section spec).
DRAFTERS = os.environ.get("SPARKSERVE_E2E_SPEC_DRAFTERS", "mtp,ngram").split(",")
PROMPT = "5,6,7,8,9,5,6,7,8,9,5,6,7,8,9,5,6"  # repeats: the n-gram drafter has matches


def run(fixture, *flags):
    r = subprocess.run([SPARKSERVE, "run", os.path.join(GOLDEN, fixture), "--ids", PROMPT, "--max-new", "24",
                        "--ignore-eos", "--json", *RUNNER_FLAGS, *flags], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def lookup_hits(out):
    """Whether some decode step's history (prompt + output so far) ends in a bigram seen before."""
    prompt = [int(x) for x in PROMPT.split(",")]
    for i in range(1, len(out)):
        h = prompt + out[:i]
        if any(h[j:j + 2] == h[-2:] for j in range(len(h) - 2)):
            return True
    return False


@pytest.mark.parametrize("fixture", FIXTURES)
def test_run_with_speculation_gives_plain_greedy_ids(fixture):
    plain = run(fixture, "--spec", "off")
    assert plain["spec"] == {"drafted": 0, "accepted": 0}
    assert len(plain["ids"]) == 24
    for drafter in DRAFTERS:
        for k in range(1, 6):
            out = run(fixture, "--spec", drafter, "--spec-tokens", str(k), "--spec-policy", "fixed")
            assert out["ids"] == plain["ids"], (drafter, k)
            # MTP always drafts; n-gram lookup wherever the history repeats its last two tokens.
            assert (out["spec"]["drafted"] > 0) == (drafter == "mtp" or lookup_hits(plain["ids"])), (drafter, k)
            assert 0 <= out["spec"]["accepted"] <= out["spec"]["drafted"]
    if "mtp" in DRAFTERS:  # a draft vocabulary changes which drafts are proposed, never the output
        out = run(fixture, "--spec", "mtp", "--draft-vocab", "64", "--spec-policy", "fixed")
        assert out["ids"] == plain["ids"] and out["spec"]["drafted"] > 0
    # The default for a checkpoint with mtp.* weights is MTP speculation (auto policy) where the
    # backend runs it: same ids.
    assert run(fixture)["ids"] == plain["ids"]


def test_bad_spec_flags_are_clear_errors():
    d = os.path.join(GOLDEN, "text_tied")
    r = subprocess.run([SPARKSERVE, "run", d, "--ids", "1,2", "--spec-tokens", "9"], capture_output=True, text=True)
    assert r.returncode != 0 and "--spec-tokens" in r.stderr
    r = subprocess.run([SPARKSERVE, "run", d, "--ids", "1,2", "--spec", "eagle"], capture_output=True, text=True)
    assert r.returncode != 0 and "--spec" in r.stderr


def completions(server, prompts):
    """Per prompt: (text, completion tokens, logprobs with the top 2 of each token)."""
    def one(prompt):
        r = httpx.post(server.url + "/v1/completions", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60,
                       json={"model": MODEL_NAME, "prompt": prompt, "max_tokens": 24, "temperature": 0,
                             "ignore_eos": True, "logprobs": 2})
        assert r.status_code == 200, r.text
        c = r.json()
        return c["choices"][0]["text"], c["usage"]["completion_tokens"], c["choices"][0]["logprobs"]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, prompts))


# The GPU's verify windows run the linears over more rows than a plain decode (another kernel, another
# summation order), so a greedy choice between two logits closer than this may flip there (issue 19's
# GPU rule); the CPU reference computes each row alike whatever the batch: exact.
TIE_GAP = 1e-2 if BACKEND == "cuda" else 0.0


def assert_same_greedy(got, want, what):
    """Equal replies, or (GPU) replies that part at a token whose plain run had a top-2 gap below TIE_GAP."""
    for i, ((text, n, lp), (want_text, want_n, want_lp)) in enumerate(zip(got, want)):
        assert n == want_n, (what, i)
        if text == want_text:
            continue
        tokens, want_tokens = lp["tokens"], want_lp["tokens"]
        j = next(k for k in range(len(want_tokens)) if k >= len(tokens) or tokens[k] != want_tokens[k])
        top = sorted(want_lp["top_logprobs"][j].values(), reverse=True)
        gap = top[0] - top[1] if len(top) > 1 else float("inf")
        assert gap < TIE_GAP, f"{what}: prompt {i} parts from plain decoding at token {j} (top-2 gap {gap:.3g})"
        print(f"{what}: prompt {i} parts from plain decoding at token {j}, a tie (top-2 gap {gap:.3g})")


def metric(server, name):
    text = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"}).text
    lines = [l for l in text.splitlines() if l.startswith(f"sparkserve:{name}_total{{")]
    assert lines, f"no {name} in /metrics"
    return sum(float(l.rsplit(" ", 1)[1]) for l in lines)


def test_http_eight_users_with_speculation_equal_plain(model_dir):
    prompts = [f"hello world {i} kato rime hello world {i} kato" for i in range(8)]
    plain = Server(model_dir, "--spec", "off")
    try:
        want = completions(plain, prompts)
        assert metric(plain, "spec_decode_num_draft_tokens") == 0
    finally:
        assert plain.stop() == 0, plain.stderr
    for drafter in DRAFTERS:
        s = Server(model_dir, "--spec", drafter, "--spec-tokens", "3", "--spec-policy", "fixed")
        try:
            assert_same_greedy(completions(s, prompts), want, drafter)
            drafts, tokens = metric(s, "spec_decode_num_drafts"), metric(s, "spec_decode_num_draft_tokens")
            accepted = metric(s, "spec_decode_num_accepted_tokens")
            assert drafts > 0 and tokens >= drafts and 0 <= accepted <= tokens
            assert metric(s, "spec_decode_num_accepted_tokens_per_pos") == accepted
        finally:
            assert s.stop() == 0, s.stderr
