#!/usr/bin/env python3
"""Generates tests/golden/hf_chat/: a tiny random Qwen3.5 text model over the Qwen3 tokenizer
fixture's vocabulary, plus whole-chat greedy references from Hugging Face transformers.

The reference pipeline is exactly what a transformers user runs:
  tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)
  -> tokenizer(prompt, add_special_tokens=False).input_ids
  -> model.generate(greedy, eos = <|im_end|>, <|endoftext|>)
  -> tokenizer.decode(new_ids, skip_special_tokens=True)

Outputs (commit them; the shared tokenizer files are NOT copied in, tests copy them at run time):
  hf_chat/config.json, generation_config.json, model.safetensors   bf16 checkpoint (tied embeddings)
  hf_chat/cases.json   [{name, messages, chat_template_kwargs, max_new_tokens, prompt, prompt_ids,
                         generated_ids, decoded, finish_reason, min_margin}]
The model is built in fp32, every parameter perturbed (as make_qwen35_golden.py does), then rounded
to bf16 and run by HF in fp32 on the rounded values, so HF and sparkserve see identical weights.
Embedding rows past the tokenizer's last id (padding ids) are zero, so no unmapped id can win;
the <|im_end|> row is scaled up (EOS_BOOST) so that some chats stop on eos, as real ones do.
Seeds are tried in order; the first one where every case's greedy steps have a top-1/top-2 logit
margin >= MIN_MARGIN and most cases run >= 8 tokens before eos is kept.

Usage: /work/torchenv/bin/python tests/golden/make_hf_chat_golden.py [--out tests/golden/hf_chat]
"""
import argparse
import json
import os
import shutil
import tempfile

import torch
from safetensors.torch import save_file
from transformers import AutoTokenizer, Qwen3_5ForCausalLM, Qwen3_5TextConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENIZER_DIR = os.path.join(REPO, "..", "shared", "fixtures", "qwen3-tokenizer")
VOCAB = 151680  # covers the fixture's 151,669 ids, padded like real checkpoints
HIDDEN = 32
MAX_NEW = 16
MIN_MARGIN = 2e-3
SEEDS = range(1, 40)
EOS_BOOST = 3.0  # scales <|im_end|>'s (tied) row so some chats end on eos within MAX_NEW tokens

CASES = [
    ("system_user", [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name three primes."}], {"enable_thinking": False}),
    ("user_only_thinking", [
        {"role": "user", "content": "Why is the sky blue?"}], {"enable_thinking": True}),
    ("multi_turn", [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Tell me a joke about compilers."}], {"enable_thinking": False}),
    ("unicode", [
        {"role": "user", "content": "Übersetze: «café», 東京, 🚀 and naïve — ok?"}], {"enable_thinking": False}),
    ("multi_turn_thinking", [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3, explained step by step?"}], {"enable_thinking": True}),
    ("default_kwargs", [
        {"role": "system", "content": "Be helpful.\nUse lists."},
        {"role": "user", "content": "  leading spaces and\ttabs  "}], {}),
]


def text_config(eos):
    layer_types = ["linear_attention", "full_attention", "linear_attention", "full_attention"]
    head_dim, prf = 16, 0.5
    half = int(head_dim * prf) // 2
    mrope = [half - 2 * (half // 3), half // 3, half // 3]
    return Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=len(layer_types), layer_types=layer_types,
        num_attention_heads=2, num_key_value_heads=1, head_dim=head_dim, intermediate_size=64,
        linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_conv_kernel_dim=4, hidden_act="silu", max_position_embeddings=512, rms_norm_eps=1e-6,
        # top-level partial_rotary_factor equal to rope_parameters' (else HF writes its default 0.25)
        tie_word_embeddings=True, mtp_num_hidden_layers=0, partial_rotary_factor=prf,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=prf,
                             mrope_section=mrope, mrope_interleaved=True),
        eos_token_id=eos, pad_token_id=eos[1], bos_token_id=None)


def build_model(seed, eos, n_real):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = text_config(eos)
    cfg._attn_implementation = "eager"
    model = Qwen3_5ForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if p.ndim == 1 or "conv1d" in name:
                p.add_(0.2 * noise)
            else:
                p.mul_(2.0).add_(0.06 * noise)
        model.model.embed_tokens.weight[n_real:] = 0
        model.model.embed_tokens.weight[eos[0]] *= EOS_BOOST
        for p in model.parameters():  # HF runs in fp32 on exactly the bf16 values we store
            p.copy_(p.to(torch.bfloat16).float())
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = eos[1]
    return model


def run_case(model, tok, eos, messages, kwargs):
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)
    ids = tok(prompt, add_special_tokens=False).input_ids
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=MAX_NEW, do_sample=False,
                             eos_token_id=eos, pad_token_id=eos[1], output_scores=True,
                             return_dict_in_generate=True)
        new = out.sequences[0, len(ids):].tolist()
        margins = [(s[0].topk(2).values[0] - s[0].topk(2).values[1]).item() for s in out.scores]
        # Cross-check cached generate against one uncached forward over prompt + output.
        full = model(input_ids=out.sequences, use_cache=False).logits[0]
        assert full[len(ids) - 1:-1].argmax(-1).tolist() == new, "cached vs uncached greedy"
    finish = "stop" if new and new[-1] in eos else "length"
    return dict(prompt=prompt, prompt_ids=ids, generated_ids=new,
                decoded=tok.decode(new, skip_special_tokens=True), finish_reason=finish,
                min_margin=min(margins))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden", "hf_chat"))
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    tj = json.load(open(os.path.join(TOKENIZER_DIR, "tokenizer.json")))
    n_real = 1 + max([*tj["model"]["vocab"].values(), *(a["id"] for a in tj["added_tokens"])])
    ids = {a["content"]: a["id"] for a in tj["added_tokens"]}
    eos = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    assert n_real <= VOCAB

    for seed in SEEDS:
        model = build_model(seed, eos, n_real)
        results = []
        for name, messages, kwargs in CASES:
            r = run_case(model, tok, eos, messages, kwargs)
            results.append(dict(name=name, messages=messages, chat_template_kwargs=kwargs,
                                max_new_tokens=MAX_NEW, **r))
        lens = [len(r["generated_ids"]) for r in results]
        margin = min(r["min_margin"] for r in results)
        long_enough = sum(n >= 8 for n in lens)
        print(f"seed {seed}: lengths {lens} min margin {margin:.4g}")
        stops = sum(r["finish_reason"] == "stop" for r in results)
        if margin >= MIN_MARGIN and long_enough >= len(CASES) - 2 and 1 <= stops < len(CASES):
            break
    else:
        raise SystemExit("no seed met the criteria")

    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        cfg = json.load(open(os.path.join(tmp, "config.json")))
    cfg["dtype"] = "bfloat16"
    cfg.pop("torch_dtype", None)
    json.dump(cfg, open(os.path.join(args.out, "config.json"), "w"), indent=1, sort_keys=True)
    json.dump({"eos_token_id": eos, "pad_token_id": eos[1], "do_sample": False},
              open(os.path.join(args.out, "generation_config.json"), "w"), indent=1)
    tensors = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()
               if k != "lm_head.weight"}
    save_file(tensors, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    meta = dict(seed=seed, transformers_pipeline="apply_chat_template(tokenize=False) -> "
                "tokenizer(add_special_tokens=False) -> generate(do_sample=False) -> "
                "decode(new_ids, skip_special_tokens=True)", eos_token_ids=eos, cases=results)
    json.dump(meta, open(os.path.join(args.out, "cases.json"), "w"), indent=1, ensure_ascii=False)
    print("wrote", args.out, "seed", seed)


if __name__ == "__main__":
    main()
