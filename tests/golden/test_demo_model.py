"""`sparkserve demo-model` and `sparkserve quantize` from the outside: the tiny demo model's own
tokenizer loads in Hugging Face `tokenizers` and its chat template renders in jinja2 as ChatML; the
shards pass the `safetensors` library's header validation; the quantize CLI's errors are clear."""
import json
import os
import pathlib
import subprocess

import jinja2
import jinja2.ext
import jinja2.sandbox
import pytest
from safetensors import safe_open
from tokenizers import Tokenizer

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("SPARKSERVE_BUILD_DIR", REPO / "build")) / "bin" / "sparkserve"


def run(*args):
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    out = {}
    for recipe in ("bf16", "nvfp4-mixed"):
        r = run("demo-model", root / recipe, "--shape", "tiny", "--recipe", recipe, "--quiet")
        assert r.returncode == 0, r.stderr
        out[recipe] = root / recipe
    return out


def test_tokenizer_loads_in_hf_tokenizers_with_qwen_special_tokens(models):
    d = models["bf16"]
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    config = json.loads((d / "config.json").read_text())
    gen = json.loads((d / "generation_config.json").read_text())
    assert tok.get_vocab_size() <= config["vocab_size"]
    ids = {t: tok.token_to_id(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
                                           "<tool_call>", "</tool_call>")}
    assert all(i is not None and i < config["vocab_size"] for i in ids.values()), ids
    assert gen["eos_token_id"] == [ids["<|im_end|>"], ids["<|endoftext|>"]]
    assert config["eos_token_id"] == ids["<|im_end|>"]
    # Byte-level: every string round-trips, special tokens are single ids, merges shorten common text.
    for text in ["Hello, world!", "The weather in Paris is mild.", "  spaces\tand\nnewlines\r\n",
                 "Café 日本語 ✓ 🙂", "def add(a, b):\n    return a + b\n"]:
        enc = tok.encode(text)
        assert tok.decode(enc.ids, skip_special_tokens=False) == text
    enc = tok.encode("<|im_start|>user\nthe weather<|im_end|>")
    assert enc.ids[0] == ids["<|im_start|>"] and enc.ids[-1] == ids["<|im_end|>"]
    assert len(tok.encode("the weather in the forest").ids) < len("the weather in the forest") / 2
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    assert cfg["eos_token"] == "<|im_end|>" and cfg["pad_token"] == "<|endoftext|>"
    assert {v["content"] for v in cfg["added_tokens_decoder"].values()} >= set(ids)


def render(template, **kw):
    # As transformers renders chat templates.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.filters["tojson"] = lambda x, **k: json.dumps(x, ensure_ascii=False)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(**kw)


def test_chat_template_is_chatml_with_tools_and_thinking(models):
    template = json.loads((models["bf16"] / "tokenizer_config.json").read_text())["chat_template"]
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render(template, messages=msgs, add_generation_prompt=True) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n")
    assert render(template, messages=msgs[1:], add_generation_prompt=True, enable_thinking=False) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    chat = [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "content": "sunny"},
            {"role": "assistant", "content": "Sunny.", "reasoning_content": "The tool said so."}]
    text = render(template, messages=chat, tools=tools, add_generation_prompt=False)
    assert text.startswith("<|im_start|>system\n# Tools\n")
    assert '\n{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}\n</tools>' in text
    assert ("<|im_start|>assistant\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "</function>\n</tool_call><|im_end|>\n") in text
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n<think>\nThe tool said so.\n</think>\n\nSunny.<|im_end|>\n")
    with pytest.raises(jinja2.exceptions.TemplateError):
        render(template, messages=[{"role": "user", "content": "a"}, {"role": "system", "content": "b"}])


def test_shards_pass_the_safetensors_library(models):
    for d, expect in ((models["bf16"], {"model.layers.0.mlp.up_proj.weight": "BF16"}),
                      (models["nvfp4-mixed"], {"model.layers.0.mlp.up_proj.weight_packed": "U8",
                                               "model.layers.0.mlp.up_proj.weight_scale": "F8_E4M3",
                                               "model.layers.0.mlp.up_proj.weight_global_scale": "F32",
                                               "lm_head.weight": "F8_E4M3", "lm_head.weight_scale": "F32",
                                               "model.embed_tokens.weight": "BF16"})):
        seen = {}
        with safe_open(str(d / "model.safetensors"), "numpy") as f:
            for k in f.keys():
                seen[k] = f.get_slice(k).get_dtype()
        for k, dt in expect.items():
            assert seen.get(k) == dt, (k, seen.get(k))


def table(stdout):
    # The per-format table: "format modules tensors bytes" rows.
    return {l.split()[0]: l.split() for l in stdout.splitlines() if len(l.split()) == 4 and l.split()[1].isdigit()}


def test_quantize_cli_reports_formats_and_errors(models, tmp_path):
    out = tmp_path / "q"
    r = run("quantize", models["bf16"], out, "--quiet")
    assert r.returncode == 0, r.stderr
    assert "calibration: 8 samples" in r.stdout and "eval vs source" in r.stdout  # test_quantize_calibration.py
    lines = table(r.stdout)
    assert lines["nvfp4"][1] == "16" and lines["fp8"][1] == "10"  # 4 layers: 12 MLP + 4 attention; 9 GDN + lm_head
    assert "round-to-nearest" in r.stdout and "untied" in r.stdout
    assert json.loads((out / "config.json").read_text())["quantization_config"]["format"] == "mixed-precision"

    r = run("quantize", out, tmp_path / "q2")
    assert r.returncode == 1 and "already quantised" in r.stderr
    r = run("quantize", models["bf16"], out)
    assert r.returncode == 1 and "not empty" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"base": "nvfp4", "rulez": {}}')
    r = run("quantize", models["bf16"], tmp_path / "q3", "--recipe", bad)
    assert r.returncode == 1 and 'unknown recipe key "rulez"' in r.stderr
    r = run("quantize", models["bf16"], tmp_path / "q3", "--recipe", "int4")
    assert r.returncode == 1 and "unknown recipe" in r.stderr
    llama = tmp_path / "llama"
    llama.mkdir()
    (llama / "config.json").write_text('{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}')
    r = run("quantize", llama, tmp_path / "q4")
    assert r.returncode == 1 and "not a readable Qwen3.5 checkpoint" in r.stderr
    assert not (tmp_path / "q3").exists() and not (tmp_path / "q4").exists()
    # A JSON recipe: everything of the MLPs in FP8, the rest as nvfp4-mixed.
    good = tmp_path / "good.json"
    good.write_text('{"rules": {"re:.*mlp\\\\.": "fp8"}, "base": "nvfp4-mixed"}')
    r = run("quantize", models["bf16"], tmp_path / "q5", "--recipe", good, "--quiet")
    assert r.returncode == 0, r.stderr
    lines = table(r.stdout)
    assert lines["nvfp4"][1] == "4" and lines["fp8"][1] == "25"  # + the 3 MTP MLP projections
