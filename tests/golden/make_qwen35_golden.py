#!/usr/bin/env python3
"""Generates the Qwen3.5 golden fixtures under tests/golden/qwen35/ (run once, commit the outputs).

Needs CPU torch + transformers 5.17 (the reference implementation of `qwen3_5`). For each tiny
configuration it builds a random model, perturbs EVERY parameter (so zero-centred norms, the GDN
gated-norm weight, A_log, dt_bias and conv weights are away from their init values), adds MTP
weights (transformers has no MTP module), and writes:

  <name>/config.json, generation_config.json, model.safetensors   the checkpoint (fp32)
  <name>/reference.safetensors:
    ids            i32 [T]        prompt token ids
    logits         f32 [T, V]     full-prefill logits of the prompt (HF forward, no cache)
    greedy         i32 [G]        greedy continuation (HF generate with its cache), eos ignored
    hidden         f32 [T, H]     target hidden states fed to MTP (after the final norm)
    mtp_logits     f32 [T-1, V]   MTP logits over the prompt: position p takes (ids[p+1], hidden[p])
    draft_tokens   i32 [K]        K-step greedy MTP draft after the prompt (see mtp_reference)
    draft_logits   f32 [K, V]     the draft steps' logits

MTP reference (FORMATS.md §2, written here from the description, not from an implementation):
  x_p = fc(cat(pre_fc_norm_embedding(embed(tok[p+1])), pre_fc_norm_hidden(h[p])))
  y   = decoder_layer(x, positions p, causal over the MTP's own earlier positions)
  logits = lm_head(mtp.norm(y)); the hidden carried to the next draft step is mtp.norm(y)
  (vLLM qwen3_5_mtp.py returns the normed hidden; the target hidden is the model output after
  the final norm, as vLLM's Qwen3NextModel.forward returns it).
Draft chain after a prompt of T tokens: step 0 sits at position T-1 with token g0 = greedy[0] and
hidden h[T-1]; step j > 0 sits at position T-1+j with token d_{j-1} = argmax(draft_logits[j-1]) and
the MTP's own hidden from step j-1. The MTP attends to its own KV of positions 0..T-2 (the prompt
pass above) plus earlier draft steps.

Usage: /work/torchenv/bin/python tests/golden/make_qwen35_golden.py [--out tests/golden/qwen35] [--only a,b]
"""
import argparse
import json
import os

import torch
from safetensors.torch import load_file, save_file
from transformers import (Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration,
                          Qwen3_5TextConfig)
from transformers.models.qwen3_5.modeling_qwen3_5 import (Qwen3_5DecoderLayer, Qwen3_5RMSNorm,
                                                          Qwen3_5TextRotaryEmbedding)

VOCAB = 512
HIDDEN = 64
PROMPT_LEN = 21
GREEDY_LEN = 12
DRAFT_K = 3

# name -> (layout, tied, text config overrides). Coverage (see tests/golden/qwen35/README.md):
# GQA ratios 1..4, GDN value/key ratios 1..4, head dims 16/24/32, dv != dk, layer patterns.
CONFIGS = {
    "text_tied": ("causal", True, dict(
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.25,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=16, intermediate_size=64)),
    "text_untied": ("causal", False, dict(
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        num_attention_heads=3, num_key_value_heads=1, head_dim=32, partial_rotary_factor=0.5,
        linear_num_key_heads=1, linear_num_value_heads=3, linear_key_head_dim=16,
        linear_value_head_dim=24, intermediate_size=48)),
    "vl_tied": ("vl", True, dict(
        layer_types=["full_attention", "linear_attention", "linear_attention"],
        num_attention_heads=4, num_key_value_heads=4, head_dim=24, partial_rotary_factor=0.25,
        linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=16, intermediate_size=64)),
    "vl_untied": ("vl", False, dict(
        layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention",
                     "full_attention"],
        num_attention_heads=8, num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.25,
        linear_num_key_heads=1, linear_num_value_heads=4, linear_key_head_dim=32,
        linear_value_head_dim=16, intermediate_size=48)),
    # No mrope_section, as transformers writes the config of any caller that sets none: its rotary
    # embedding then uses [11, 11, 10], which does not fit these rotary dims (8 = 4 pairs and 12 = 6
    # pairs); for text-only positions it is plain partial RoPE all the same.
    "text_nosection": ("causal", False, dict(
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, partial_rotary_factor=0.25,
        linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=16,
        linear_value_head_dim=16, intermediate_size=48, mrope_section=None)),
    "vl_nosection": ("vl", True, dict(
        layer_types=["linear_attention", "full_attention", "full_attention"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, partial_rotary_factor=0.5,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=8, intermediate_size=64, mrope_section=None)),
}


def text_config_dict(over, tied):
    rot = int(over["head_dim"] * over["partial_rotary_factor"])
    half = rot // 2
    rope = dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=over["partial_rotary_factor"])
    if "mrope_section" not in over:  # sums to rot/2 (T gets the rest)
        rope.update(mrope_section=[half - 2 * (half // 3), half // 3, half // 3], mrope_interleaved=True)
    d = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=len(over["layer_types"]),
             hidden_act="silu", max_position_embeddings=256, rms_norm_eps=1e-6,
             tie_word_embeddings=tied, linear_conv_kernel_dim=4, mtp_num_hidden_layers=1,
             rope_parameters=rope, eos_token_id=VOCAB - 2, pad_token_id=None, bos_token_id=None)
    for k, v in over.items():
        if k not in ("partial_rotary_factor", "mrope_section"):
            d[k] = v
    return d


def perturb_(model, gen):
    """Moves every parameter away from its init value (norms, A_log, dt_bias, conv included)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if p.ndim == 1:  # norms (zero-centred or ~1), A_log, dt_bias
                p.add_(0.2 * noise)
            elif "conv1d" in name:
                p.add_(0.2 * noise)
            else:  # linears and embeddings: N(0, 0.02) init -> larger spread for decisive logits
                p.mul_(2.0).add_(0.06 * noise)


def make_mtp(text_cfg, gen):
    """The MTP block as plain modules with checkpoint names (mtp.*), perturbed like the rest."""
    layer_cfg = Qwen3_5TextConfig(**{**text_cfg.to_dict(), "layer_types": ["full_attention"],
                                     "num_hidden_layers": 1})
    layer_cfg._attn_implementation = "eager"
    mods = torch.nn.ModuleDict(dict(
        fc=torch.nn.Linear(2 * HIDDEN, HIDDEN, bias=False),
        pre_fc_norm_embedding=Qwen3_5RMSNorm(HIDDEN, eps=text_cfg.rms_norm_eps),
        pre_fc_norm_hidden=Qwen3_5RMSNorm(HIDDEN, eps=text_cfg.rms_norm_eps),
        norm=Qwen3_5RMSNorm(HIDDEN, eps=text_cfg.rms_norm_eps),
        layer=Qwen3_5DecoderLayer(layer_cfg, 0),
    ))
    with torch.no_grad():
        for name, p in mods.named_parameters():
            if p.ndim == 1:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=gen))
    rope = Qwen3_5TextRotaryEmbedding(layer_cfg)
    return mods, rope


def mtp_state_dict(mods):
    out = {}
    for name, t in mods.state_dict().items():
        name = name.replace("layer.", "layers.0.", 1) if name.startswith("layer.") else name
        out["mtp." + name] = t.detach().clone().contiguous()
    return out


def mtp_reference(mods, rope, embed, lm_head, tokens, hiddens, positions):
    """MTP forward over a run of positions (causal among them). Returns (logits, normed hidden)."""
    with torch.no_grad():
        e = mods["pre_fc_norm_embedding"](embed[tokens])
        h = mods["pre_fc_norm_hidden"](hiddens)
        x = mods["fc"](torch.cat([e, h], dim=-1))[None]  # [1, n, H]
        n = x.shape[1]
        pos = torch.tensor(positions)[None]  # [1, n]
        cos_sin = rope(x, pos[None].expand(3, 1, n))
        mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
        y = mods["layer"](x, position_embeddings=cos_sin, attention_mask=mask)
        y = y[0] if isinstance(y, tuple) else y
        y = mods["norm"](y)[0]
        return y @ lm_head.T, y


def build(name, layout, tied, over, out_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    tcfg = text_config_dict(over, tied)
    if layout == "causal":
        cfg = Qwen3_5TextConfig(**tcfg)
        cfg._attn_implementation = "eager"
        model = Qwen3_5ForCausalLM(cfg)
        text_model, text_cfg = model.model, cfg
    else:
        vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=4,
                      spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=HIDDEN,
                      num_position_embeddings=16)
        cfg = Qwen3_5Config(text_config=tcfg, vision_config=vision, tie_word_embeddings=tied,
                            image_token_id=VOCAB - 10, video_token_id=VOCAB - 9,
                            vision_start_token_id=VOCAB - 8, vision_end_token_id=VOCAB - 7)
        cfg._attn_implementation = "eager"
        model = Qwen3_5ForConditionalGeneration(cfg)
        text_model, text_cfg = model.model.language_model, cfg.text_config
    model = model.float().eval()
    perturb_(model, gen)
    if tied:
        assert model.lm_head.weight.data_ptr() == text_model.embed_tokens.weight.data_ptr()
    mods, rope = make_mtp(text_cfg, gen)

    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    model.generation_config.eos_token_id = [VOCAB - 2, VOCAB - 1]
    model.save_pretrained(d, safe_serialization=True)
    # Append the MTP weights to the checkpoint (transformers drops mtp.* on load, keeps it on disk).
    st = os.path.join(d, "model.safetensors")
    tensors = load_file(st)
    tensors.update(mtp_state_dict(mods))
    save_file(tensors, st, metadata={"format": "pt"})

    # Reference outputs.
    ids = torch.randint(0, VOCAB - 16, (PROMPT_LEN,), generator=gen)
    with torch.no_grad():
        logits = model(input_ids=ids[None], use_cache=False).logits[0].float()
        hidden = text_model(input_ids=ids[None], use_cache=False).last_hidden_state[0].float()
        assert torch.allclose(hidden @ model.lm_head.weight.T, logits, atol=1e-5), "hidden is lm_head input"
        out = model.generate(input_ids=ids[None], max_new_tokens=GREEDY_LEN, do_sample=False,
                             eos_token_id=None, pad_token_id=0, min_new_tokens=GREEDY_LEN)
        greedy = out[0, PROMPT_LEN:]
        # Cross-check the cached generate path against full re-forwards (no cache).
        full = model(input_ids=out, use_cache=False).logits[0]
        assert torch.equal(full[PROMPT_LEN - 1:-1].argmax(-1), greedy), "cached vs uncached greedy"
        top2 = full[PROMPT_LEN - 1:-1].topk(2, dim=-1).values
        margin = (top2[:, 0] - top2[:, 1]).min().item()

        embed = text_model.embed_tokens.weight
        lm_head = model.lm_head.weight
        # MTP over the prompt: position p takes (ids[p+1], hidden[p]).
        mtp_logits, _ = mtp_reference(mods, rope, embed, lm_head, ids[1:], hidden[:-1],
                                      list(range(PROMPT_LEN - 1)))
        # Draft chain after the prompt (recomputed from scratch each step: no cache to get wrong).
        toks, hids, poss = list(ids[1:]), [h for h in hidden[:-1]], list(range(PROMPT_LEN - 1))
        tok, hid = int(greedy[0]), hidden[-1]
        draft_tokens, draft_logits = [], []
        for j in range(DRAFT_K):
            toks.append(torch.tensor(tok)); hids.append(hid); poss.append(PROMPT_LEN - 1 + j)
            lg, y = mtp_reference(mods, rope, embed, lm_head, torch.stack(toks), torch.stack(hids), poss)
            draft_logits.append(lg[-1]); tok = int(lg[-1].argmax()); hid = y[-1]
            draft_tokens.append(tok)
        # The prompt-pass rows must be unchanged by appending draft steps (causality check).
        assert torch.allclose(lg[:PROMPT_LEN - 1], mtp_logits, atol=1e-5)

    ref = dict(ids=ids.to(torch.int32), logits=logits.contiguous(), greedy=greedy.to(torch.int32),
               hidden=hidden.contiguous(), mtp_logits=mtp_logits.contiguous(),
               draft_tokens=torch.tensor(draft_tokens, dtype=torch.int32),
               draft_logits=torch.stack(draft_logits).contiguous())
    save_file(ref, os.path.join(d, "reference.safetensors"))
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print(f"{name}: layout={layout} tied={tied} layers={text_cfg.layer_types} "
          f"max|logit|={logits.abs().max():.3f} greedy={greedy.tolist()} min top1-top2 margin={margin:.4f} "
          f"draft={draft_tokens} bytes={size}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "qwen35"))
    ap.add_argument("--only", default="", help="comma-separated config names (default: all)")
    args = ap.parse_args()
    only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(only) - set(CONFIGS))
    if unknown:
        ap.error(f"unknown config(s) {unknown}; known: {list(CONFIGS)}")
    torch.set_default_dtype(torch.float32)
    for i, (name, (layout, tied, over)) in enumerate(CONFIGS.items()):
        if not only or name in only:  # the seed stays the config's position, whatever is selected
            build(name, layout, tied, over, args.out, seed=1234 + i)


if __name__ == "__main__":
    main()
