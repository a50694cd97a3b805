"""`sparkserve bench engine` on the CPU backend with the tiny demo model: the table and JSON cover
every (batch, context) point and every (batch, prompt length) prefill point with positive rates;
bad arguments are refused with exit code 2 and a message naming the flag. (GPU figures, floors
and --profile are exercised by tests/gpu/run.sh.)"""
import json
import os
import subprocess

import pytest

BUILD_DIR = os.environ.get("SPARKSERVE_BUILD_DIR", "build")
SPARKSERVE = os.path.join(BUILD_DIR, "bin", "sparkserve")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench_engine") / "tiny"
    subprocess.run([SPARKSERVE, "demo-model", str(d), "--shape", "tiny", "--quiet"], check=True,
                   capture_output=True, timeout=120)
    return d


def test_points_and_prefill_in_table_and_json(tiny_model, tmp_path):
    out = tmp_path / "engine.json"
    r = subprocess.run([SPARKSERVE, "bench", "engine", str(tiny_model), "--backend", "cpu", "--batch", "1,3",
                        "--context", "0,20", "--prompt-len", "8,33", "--steps", "3", "--warmup", "1",
                        "--repeats", "1", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    j = json.loads(out.read_text())
    assert j["backend"] == "cpu"
    assert sorted((p["batch"], p["context"]) for p in j["points"]) == [(1, 0), (1, 20), (3, 0), (3, 20)]
    for p in j["points"]:
        assert p["tok_per_s"] > 0 and p["ms_per_step"] > 0
        assert abs(p["tok_per_s"] * p["ms_per_step"] / 1e3 - p["batch"]) < 1e-6 * p["batch"] + 1e-9
    assert sorted((p["batch"], p["prompt_len"]) for p in j["prefill"]) == [(1, 8), (1, 33), (3, 8), (3, 33)]
    for p in j["prefill"]:
        assert p["tok_per_s"] > 0
        assert abs(p["tok_per_s"] * p["time_to_first_tokens_s"] - p["batch"] * p["prompt_len"]) < 1e-6 * p["tok_per_s"]
    assert "prefill t/s" in r.stdout and "tok/s" in r.stdout


def test_spec_prints_the_step_cost_curve(tiny_model):
    r = subprocess.run([SPARKSERVE, "bench", "engine", str(tiny_model), "--backend", "cpu", "--batch", "2",
                        "--steps", "3", "--warmup", "1", "--repeats", "1", "--spec", "mtp", "--spec-tokens", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "step cost curve" in r.stdout and "one MTP draft step" in r.stdout, r.stdout
    rows = [l.split() for l in r.stdout.splitlines() if l.split() and l.split()[0].isdigit() and len(l.split()) == 4]
    assert [int(x[0]) for x in rows][:9] == [1, 2, 3, 4, 5, 6, 7, 8, 12] and int(rows[-1][0]) == 256
    assert all(float(x[1]) > 0 for x in rows)


@pytest.mark.parametrize("args,needle", [
    (["--batch", "0"], "--batch"),
    (["--context", "-1"], "--context"),
    (["--prompt-len", "0"], "--prompt-len"),
    (["--steps", "0"], "--steps"),
])
def test_bad_arguments_are_refused(tiny_model, args, needle):
    r = subprocess.run([SPARKSERVE, "bench", "engine", str(tiny_model), "--backend", "cpu", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr or needle.strip("-") in r.stderr, r.stderr
