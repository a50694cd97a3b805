"""Runner flags that only the CUDA backend takes are refused on the CPU backend with a message
naming what to change, by every command that loads a model (run, score, serve, bench engine), and
values outside a flag's set are refused by the parser."""
import os
import subprocess

import pytest

BUILD_DIR = os.environ.get("SPARKSERVE_BUILD_DIR", "build")
SPARKSERVE = os.path.join(BUILD_DIR, "bin", "sparkserve")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("runner_flags") / "tiny"
    subprocess.run([SPARKSERVE, "demo-model", str(d), "--shape", "tiny", "--quiet"], check=True,
                   capture_output=True, timeout=120)
    return d


COMMANDS = {
    "run": lambda m: ["run", str(m), "--ids", "1,2,3", "--max-new", "2", "--backend", "cpu"],
    "score": lambda m: ["score", str(m), "--ids", "1,2,3", "--backend", "cpu"],
    "serve": lambda m: ["serve", str(m), "--host", "127.0.0.1", "--port", "0", "--backend", "cpu"],
    "bench": lambda m: ["bench", "engine", str(m), "--backend", "cpu", "--steps", "1", "--warmup", "0",
                        "--repeats", "1"],
}


# (flag, CUDA-only value, the CPU backend's refusal, the CPU default)
DTYPE_FLAGS = [("--kv-dtype", "fp8", "fp8 KV cache needs the CUDA backend", "bf16"),
               ("--state-dtype", "bf16", "bf16 GDN state needs the CUDA backend", "fp32")]


def run_with(tiny_model, command, *flags):
    return subprocess.run([SPARKSERVE, *COMMANDS[command](tiny_model), *flags], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("flag,value,refusal,default", DTYPE_FLAGS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cuda_only_dtype_is_refused_on_the_cpu(tiny_model, command, flag, value, refusal, default):
    r = run_with(tiny_model, command, flag, value)
    assert r.returncode != 0
    assert refusal in r.stderr, r.stderr


def test_w4a4_prefill_needs_cuda(tiny_model):
    r = run_with(tiny_model, "serve", "--w4a4-prefill")
    assert r.returncode != 0
    assert "--w4a4-prefill needs the CUDA backend" in r.stderr, r.stderr


@pytest.mark.parametrize("flag,value,refusal,default", DTYPE_FLAGS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unknown_dtype_is_refused_by_the_parser(tiny_model, command, flag, value, refusal, default):
    r = run_with(tiny_model, command, flag, "fp16")
    assert r.returncode != 0
    assert flag in r.stderr and "fp16" in r.stderr, r.stderr


@pytest.mark.parametrize("flag,value,refusal,default", DTYPE_FLAGS)
def test_cpu_default_dtype_is_accepted(tiny_model, flag, value, refusal, default):
    r = run_with(tiny_model, "run", flag, default)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unknown_backend_is_refused(tiny_model, command):
    args = COMMANDS[command](tiny_model)
    args[args.index("--backend") + 1] = "tpu"
    r = subprocess.run([SPARKSERVE, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "backend" in r.stderr and "'tpu'" in r.stderr and "expected auto, cpu or cuda" in r.stderr, r.stderr


def test_score_backend_cpu_is_the_default_reference(tiny_model):
    default = subprocess.run([SPARKSERVE, "score", str(tiny_model), "--ids", "1,2,3"], capture_output=True,
                             text=True, timeout=60)
    assert default.returncode == 0, default.stderr
    r = run_with(tiny_model, "score")
    assert r.returncode == 0, r.stderr
    assert r.stdout == default.stdout
