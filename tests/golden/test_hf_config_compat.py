"""Qwen3.5 configs as Hugging Face transformers 5.17 writes them, through every command that loads a
model (inspect, run, score, quantize, serve), with transformers' own config classes as the oracle.

transformers writes no `rope_parameters.mrope_section` for a Qwen3_5TextConfig whose caller sets
none; its text rotary embedding then falls back to [11, 11, 10], which need not fit the rotary dim
(head_dim * partial_rotary_factor), and it loads and runs such models: with text-only positions
the three MRoPE components are equal, and any section is plain partial RoPE. So these configs must
load, and a fixture's logits (written by transformers with a fitting section) must not change when
the section is removed or replaced by one that does not fit.
"""
import json
import os
import shutil
import signal
import subprocess
import time

import httpx
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from transformers import Qwen3_5Config, Qwen3_5TextConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden", "qwen35")
TEMPLATE = os.path.join(ROOT, "..", "shared", "fixtures", "qwen3_5-chat_template.jinja")
BINARY = os.path.join(os.environ.get("SPARKSERVE_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "sparkserve")
VOCAB, HIDDEN = 512, 64


def sparkserve(*args, timeout=120):
    return subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def text_config(head_dim, partial_rotary_factor, tied):
    """A tiny Qwen3_5TextConfig with no mrope_section (partial_rotary_factor None: transformers' default)."""
    kw = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, intermediate_size=48,
              layer_types=["linear_attention", "full_attention"], num_attention_heads=2, num_key_value_heads=1,
              head_dim=head_dim, linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=16,
              linear_value_head_dim=16, tie_word_embeddings=tied, max_position_embeddings=256,
              eos_token_id=VOCAB - 1)
    if partial_rotary_factor is not None:
        kw["partial_rotary_factor"] = partial_rotary_factor
    return Qwen3_5TextConfig(**kw)


def weight_shapes(cfg, prefix):
    """name -> shape of every text-model tensor of `cfg` (FORMATS.md §1; `prefix` is model. or model.language_model.)."""
    H, I, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    nk, nv, dk, dv = (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                      cfg.linear_value_head_dim)
    conv = 2 * nk * dk + nv * dv
    shapes = {prefix + "embed_tokens.weight": [V, H], prefix + "norm.weight": [H]}
    for i, kind in enumerate(cfg.layer_types):
        p = f"{prefix}layers.{i}."
        shapes.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                       p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
                       p + "mlp.down_proj.weight": [H, I]})
        if kind == "full_attention":
            a = p + "self_attn."
            shapes.update({a + "q_proj.weight": [2 * nh * hd, H], a + "k_proj.weight": [nkv * hd, H],
                           a + "v_proj.weight": [nkv * hd, H], a + "o_proj.weight": [H, nh * hd],
                           a + "q_norm.weight": [hd], a + "k_norm.weight": [hd]})
        else:
            g = p + "linear_attn."
            shapes.update({g + "in_proj_qkv.weight": [conv, H], g + "in_proj_z.weight": [nv * dv, H],
                           g + "in_proj_a.weight": [nv, H], g + "in_proj_b.weight": [nv, H],
                           g + "conv1d.weight": [conv, 1, cfg.linear_conv_kernel_dim], g + "A_log": [nv],
                           g + "dt_bias": [nv], g + "norm.weight": [dv], g + "out_proj.weight": [H, nv * dv]})
    return shapes


def write_tokenizer(d):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["hello world"], trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(d / "tokenizer.json"))
    shutil.copy(TEMPLATE, d / "chat_template.jinja")


def write_model(d, layout, head_dim, partial_rotary_factor, tied):
    """config.json saved by transformers itself (as model.save_pretrained writes it), random weights."""
    text = text_config(head_dim, partial_rotary_factor, tied)
    if layout == "causal":
        cfg, prefix = text, "model."
        cfg.architectures = ["Qwen3_5ForCausalLM"]
    else:
        cfg = Qwen3_5Config(text_config=text.to_dict(), tie_word_embeddings=tied,
                            vision_config=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2,
                                               out_hidden_size=HIDDEN))
        cfg.architectures = ["Qwen3_5ForConditionalGeneration"]
        prefix = "model.language_model."
    cfg.save_pretrained(str(d))
    saved = json.loads((d / "config.json").read_text())
    rope = (saved if layout == "causal" else saved["text_config"])["rope_parameters"]
    assert "mrope_section" not in rope, rope  # what the issue is about
    rng = np.random.default_rng(head_dim)
    shapes = weight_shapes(text, prefix)
    if not tied:
        shapes["lm_head.weight"] = [VOCAB, HIDDEN]
    tensors = {n: (0.1 * rng.standard_normal(s)).astype(np.float32) for n, s in shapes.items()}
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(d)
    return text


# (layout, head_dim, partial_rotary_factor or None for transformers' default, tied)
CASES = {
    "text_hd32_prf0.25": ("causal", 32, 0.25, False),  # rotary 8: the case
    "vl_hd16_prf0.5": ("vl", 16, 0.5, True),           # rotary 8
    "text_hd24_prf0.5": ("causal", 24, 0.5, True),     # rotary 12
    "vl_hd16_default": ("vl", 16, None, False),         # transformers' default 0.25: rotary 4
    "text_hd64_prf1": ("causal", 64, 1.0, False),      # rotary 64: the default [11, 11, 10] fits
}


@pytest.fixture(scope="module", params=sorted(CASES))
def hf_model(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    layout, head_dim, prf, tied = CASES[request.param]
    cfg = write_model(d, layout, head_dim, prf, tied)
    return d, cfg


def rotary_dim(cfg):
    return int(cfg.head_dim * cfg.rope_parameters["partial_rotary_factor"])


def test_inspect_shows_the_rope_and_the_missing_section(hf_model):
    d, cfg = hf_model
    r = sparkserve("inspect", d, "--json")
    assert r.returncode == 0, r.stderr
    rope = json.loads(r.stdout)["rope"]
    assert rope["rotary_dim"] == rotary_dim(cfg)
    assert rope["partial_rotary_factor"] == cfg.rope_parameters["partial_rotary_factor"]
    assert rope["mrope_section"] is None
    if rotary_dim(cfg) == 64:  # transformers' default split fits: images could use it
        assert rope["mrope_section_3d"] == [11, 11, 10]
    else:
        assert "mrope_section_3d" not in rope
        assert "images and video" in rope["mrope_section_3d_error"]
    text = sparkserve("inspect", d)
    assert text.returncode == 0 and f"rotary dim {rotary_dim(cfg)}" in text.stdout, text.stderr


def test_run_and_score_agree(hf_model, tmp_path):
    d, _ = hf_model
    ids = "1,2,3,4,5"
    r = sparkserve("run", d, "--ids", ids, "--max-new", "4", "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    greedy = json.loads(r.stdout)["ids"]
    assert len(greedy) == 4
    s = sparkserve("score", d, "--ids", ids + "," + ",".join(map(str, greedy[:3])), "--out", tmp_path / "l.npy")
    assert s.returncode == 0, s.stderr
    logits = np.load(tmp_path / "l.npy")
    assert list(logits[4:].argmax(-1)) == greedy  # scoring the greedy path predicts it again


def test_quantize_and_run_the_output(hf_model, tmp_path):
    d, _ = hf_model
    out = tmp_path / "q"
    r = sparkserve("quantize", d, out, "--recipe", "fp8", "--no-calib", "--no-eval", "--quiet")
    assert r.returncode == 0, r.stderr
    r = sparkserve("run", out, "--ids", "1,2,3", "--max-new", "2", "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["ids"]) == 2


def test_serve_answers(hf_model):
    d, _ = hf_model
    p = subprocess.Popen([BINARY, "serve", str(d), "--host", "127.0.0.1", "--port", "0", "--max-seq-len", "64",
                          "--max-batch", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("listening on http://"), (line, p.stderr.read() if p.poll() is not None else "")
        url = line.strip().split(" ", 2)[2]
        deadline = time.time() + 30
        while httpx.get(url + "/health").status_code != 200:
            assert p.poll() is None and time.time() < deadline, "server did not become ready"
            time.sleep(0.05)
        r = httpx.post(url + "/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 3, "temperature": 0,
                                                      "ignore_eos": True}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] == 3
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0


@pytest.mark.parametrize("name", ["text_tied", "text_untied", "vl_tied", "vl_untied"])
@pytest.mark.parametrize("section", ["absent", "ill-fitting"])
def test_logits_match_transformers_without_a_fitting_section(name, section, tmp_path):
    """The fixtures' transformers logits (a fitting section) hold for the section transformers
    falls back to ([11, 11, 10], fitting none of these rotary dims) or one that does not fit."""
    d = tmp_path / name
    shutil.copytree(os.path.join(GOLDEN, name), d)
    cfg = json.loads((d / "config.json").read_text())
    rope = (cfg.get("text_config") or cfg)["rope_parameters"]
    if section == "absent":
        del rope["mrope_section"]
    else:
        rope["mrope_section"] = [11, 11, 10]
    (d / "config.json").write_text(json.dumps(cfg))
    ref = load_file(os.path.join(GOLDEN, name, "reference.safetensors"))
    r = sparkserve("score", d, "--ids", ",".join(str(int(i)) for i in ref["ids"]), "--out", tmp_path / "l.npy")
    assert r.returncode == 0, r.stderr
    logits = np.load(tmp_path / "l.npy")
    assert np.abs(logits - ref["logits"]).max() / np.abs(ref["logits"]).max() <= 1e-4
