#!/usr/bin/env python3
"""Random Qwen3.5 checkpoints in Hugging Face layout, and their conversion to llama.cpp `qwen35` GGUF
files with the `gguf` package's writer, mirroring llama.cpp's convert_hf_to_gguf.py (Qwen3_5TextModel):
tensor names from gguf.get_tensor_name_map(QWEN35), value-head reorder (grouped -> tiled) when
linear_num_key_heads < linear_num_value_heads, A_log -> -exp(A_log), dt_bias -> ssm_dt.bias, conv1d
squeezed, RMSNorm weights + 1 (all but linear_attn.norm), MTP as blk.{n_layers} + nextn.*, the
qwen35.* hyper-parameters and the tokenizer as tokenizer.ggml.* (gpt2 BPE).

Weight types: F32 for 1-D tensors and conv1d (as llama.cpp keeps them), the chosen type for 2-D
weights whose rows are whole blocks of it (others BF16, as llama.cpp falls back). gguf's quants
module quantises BF16 and Q8_0; it only dequantises the K-quants, so Q4_K and Q6_K blocks are
encoded here (a plain round-to-nearest encoder of ggml's block layouts; any valid blocks do, the
oracle decodes them with gguf's dequantiser).

  python3 gguf_convert.py random HF_DIR [--hidden 256] [--seed 0] [--tokenizer-dir DIR]
  python3 gguf_convert.py convert HF_DIR OUT.gguf --type q4_k|q4_k_m|q6_k|q8_0|bf16 [--tokenizer-dir DIR]
  python3 gguf_convert.py oracle OUT.gguf HF_DIR ORACLE_DIR   # HF_DIR's weights as the GGUF holds them
"""
import argparse
import json
import os
import shutil

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T

try:
    import ml_dtypes
    BF16 = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover
    BF16 = None

TYPES = {"bf16": T.BF16, "f16": T.F16, "q8_0": T.Q8_0, "q4_k": T.Q4_K, "q5_k": T.Q5_K, "q6_k": T.Q6_K,
         "q4_k_m": "q4_k_m"}
# llama.cpp's Q4_K_M mix, simplified: Q6_K for the embedding, the output and the ffn_down / attn_v
# weights, Q4_K for the other 2-D weights.
Q4_K_M_Q6 = ("token_embd.", "output.", "ffn_down.", "attn_v.")


# ------------------------------------------------------------------------------------- safetensors io
def load_st(path):
    from safetensors.numpy import load_file
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        buf = raw[8 + n + b:8 + n + e]
        if v["dtype"] == "BF16":
            a = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            a = a.view(np.float32)
        else:
            a = np.frombuffer(buf, dtype={"F32": np.float32, "F16": np.float16}[v["dtype"]]).astype(np.float32)
        out[k] = a.reshape(v["shape"])
    del load_file
    return out


def bf16_bytes(a):
    """f32 -> bf16 bits, round to nearest even (as ml_dtypes / our F32ToBf16)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r


def save_st(path, tensors):
    """name -> (np.float32 array, "BF16"|"F32")"""
    header, blobs, off = {}, [], 0
    for k, (a, dt) in tensors.items():
        b = bf16_bytes(a).tobytes() if dt == "BF16" else np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for b in blobs:
            f.write(b)


# ------------------------------------------------------------------------------ random checkpoint
def make_random(out, hidden=256, seed=0, tokenizer_dir=None, vocab=512):
    rng = np.random.default_rng(seed)
    H, I, L, nh, nkv, hd = hidden, 2 * hidden, 4, 4, 2, hidden // 4
    nk, nv, dk, dv, K = 2, 4, hidden // 4, hidden // 4, 4
    cfg = {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": vocab,
        "hidden_size": H, "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": nh,
        "num_key_value_heads": nkv, "head_dim": hd, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096, "attn_output_gate": True, "linear_conv_kernel_dim": K,
        "linear_key_head_dim": dk, "linear_value_head_dim": dv, "linear_num_key_heads": nk,
        "linear_num_value_heads": nv, "full_attention_interval": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [2, 3, 3], "mrope_interleaved": True},
        "tie_word_embeddings": False, "mtp_num_hidden_layers": 1, "eos_token_id": vocab - 1, "torch_dtype": "bfloat16"}
    w = {}

    def lin(name, o, i):
        w[name] = (rng.standard_normal((o, i)).astype(np.float32) * (1.0 / np.sqrt(i)), "BF16")

    def norm(name, n, center=0.0):
        w[name] = (center + 0.1 * rng.standard_normal(n).astype(np.float32), "BF16")

    def attn(p):
        norm(p + "input_layernorm.weight", H)
        norm(p + "post_attention_layernorm.weight", H)
        lin(p + "self_attn.q_proj.weight", 2 * nh * hd, H)
        lin(p + "self_attn.k_proj.weight", nkv * hd, H)
        lin(p + "self_attn.v_proj.weight", nkv * hd, H)
        lin(p + "self_attn.o_proj.weight", H, nh * hd)
        norm(p + "self_attn.q_norm.weight", hd)
        norm(p + "self_attn.k_norm.weight", hd)

    def mlp(p):
        lin(p + "mlp.gate_proj.weight", I, H)
        lin(p + "mlp.up_proj.weight", I, H)
        lin(p + "mlp.down_proj.weight", H, I)

    w["model.embed_tokens.weight"] = (rng.standard_normal((vocab, H)).astype(np.float32) * 0.5, "BF16")
    lin("lm_head.weight", vocab, H)
    norm("model.norm.weight", H)
    for i in range(L):
        p = f"model.layers.{i}."
        if cfg["layer_types"][i] == "full_attention":
            attn(p)
        else:
            norm(p + "input_layernorm.weight", H)
            norm(p + "post_attention_layernorm.weight", H)
            lin(p + "linear_attn.in_proj_qkv.weight", 2 * nk * dk + nv * dv, H)
            lin(p + "linear_attn.in_proj_z.weight", nv * dv, H)
            lin(p + "linear_attn.in_proj_a.weight", nv, H)
            lin(p + "linear_attn.in_proj_b.weight", nv, H)
            w[p + "linear_attn.A_log"] = (np.log(rng.uniform(1, 16, nv)).astype(np.float32), "F32")
            w[p + "linear_attn.dt_bias"] = (rng.uniform(-1, 1, nv).astype(np.float32), "BF16")
            w[p + "linear_attn.conv1d.weight"] = (0.3 * rng.standard_normal((2 * nk * dk + nv * dv, 1, K)).astype(np.float32), "BF16")
            norm(p + "linear_attn.norm.weight", dv, center=1.0)
            lin(p + "linear_attn.out_proj.weight", H, nv * dv)
        mlp(p)
    lin("mtp.fc.weight", H, 2 * H)
    norm("mtp.pre_fc_norm_embedding.weight", H)
    norm("mtp.pre_fc_norm_hidden.weight", H)
    norm("mtp.norm.weight", H)
    attn("mtp.layers.0.")
    mlp("mtp.layers.0.")
    # Values as stored (bf16-rounded) so the converter sees exactly the checkpoint's numbers.
    w = {k: ((bf16_bytes(a).astype(np.uint32) << 16).view(np.float32).reshape(a.shape) if dt == "BF16" else a, dt)
         for k, (a, dt) in w.items()}
    os.makedirs(out, exist_ok=True)
    save_st(os.path.join(out, "model.safetensors"), w)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    if tokenizer_dir:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tokenizer_dir, f), os.path.join(out, f))


# --------------------------------------------------------------------------- K-quant block encoders
def _f16(x):
    return np.asarray(x, dtype=np.float16)


def encode_q8_0(rows):
    return gguf.quants.quantize(rows.astype(np.float32), T.Q8_0)


def _pack_scale_min(sc, m):
    """8 six-bit scales and mins -> 12 bytes (ggml's get_scale_min_k4 layout), per block."""
    q = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    q[:, 0:4] = sc[:, 0:4] & 63
    q[:, 4:8] = m[:, 0:4] & 63
    q[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    q[:, 0:4] |= (sc[:, 4:8] >> 4) << 6
    q[:, 4:8] |= (m[:, 4:8] >> 4) << 6
    return q


def encode_q45_k(x, five):
    """x [nb, 256] -> Q4_K (144 B) / Q5_K (176 B) blocks."""
    nb = x.shape[0]
    levels = 31 if five else 15
    sub = x.reshape(nb, 8, 32)
    lo = np.minimum(sub.min(axis=2), 0)
    hi = sub.max(axis=2)
    scale = (hi - lo) / levels
    mins = -lo
    d = _f16(scale.max(axis=1) / 63).astype(np.float32)
    dmin = _f16(mins.max(axis=1) / 63).astype(np.float32)
    sc = np.clip(np.round(scale / np.where(d > 0, d, 1)[:, None]), 0, 63).astype(np.uint8)
    m = np.clip(np.round(mins / np.where(dmin > 0, dmin, 1)[:, None]), 0, 63).astype(np.uint8)
    ds = d[:, None] * sc
    q = np.clip(np.round((sub + (dmin[:, None] * m)[:, :, None]) / np.where(ds > 0, ds, 1)[:, :, None]), 0, levels).astype(np.uint8)
    q = q.reshape(nb, 4, 2, 32)  # 64-element chunks: first 32 low nibble, next 32 high nibble
    qs = ((q[:, :, 0, :] & 0xF) | ((q[:, :, 1, :] & 0xF) << 4)).reshape(nb, 128)
    parts = [_f16(d).view(np.uint8).reshape(nb, 2), _f16(dmin).view(np.uint8).reshape(nb, 2), _pack_scale_min(sc, m)]
    if five:
        qh = np.zeros((nb, 32), dtype=np.uint8)
        for c in range(4):
            qh |= ((q[:, c, 0, :] >> 4) & 1) << (2 * c)
            qh |= ((q[:, c, 1, :] >> 4) & 1) << (2 * c + 1)
        parts.append(qh)
    parts.append(qs)
    return np.concatenate(parts, axis=1)


def encode_q6_k(x):
    """x [nb, 256] -> Q6_K blocks (210 B): ql[128], qh[64], scales i8[16], f16 d."""
    nb = x.shape[0]
    sub = x.reshape(nb, 16, 16)
    amax = np.abs(sub).max(axis=2)
    s = amax / 31
    d = _f16(s.max(axis=1) / 127).astype(np.float32)
    sc = np.clip(np.round(s / np.where(d > 0, d, 1)[:, None]), -128, 127).astype(np.int8)
    ds = d[:, None] * sc.astype(np.float32)
    q = (np.clip(np.round(sub / np.where(ds != 0, ds, 1)[:, :, None]), -32, 31) + 32).astype(np.uint8).reshape(nb, 2, 4, 32)
    ql = np.zeros((nb, 2, 64), dtype=np.uint8)
    qh = np.zeros((nb, 2, 32), dtype=np.uint8)
    ql[:, :, :32] = (q[:, :, 0] & 0xF) | ((q[:, :, 2] & 0xF) << 4)
    ql[:, :, 32:] = (q[:, :, 1] & 0xF) | ((q[:, :, 3] & 0xF) << 4)
    for g in range(4):
        qh |= (q[:, :, g] >> 4) << (2 * g)
    return np.concatenate([ql.reshape(nb, 128), qh.reshape(nb, 64), sc.view(np.uint8), _f16(d).view(np.uint8).reshape(nb, 2)], axis=1)


def quantize(a, qtype):
    """2-D f32 [rows, cols] -> (stored array, raw dtype) for GGUFWriter.add_tensor."""
    if qtype == T.BF16:
        return gguf.quants.quantize(a, T.BF16), T.BF16
    if qtype == T.F16:
        return a.astype(np.float16), T.F16
    if qtype == T.Q8_0:
        return encode_q8_0(a), T.Q8_0
    blocks = a.reshape(-1, 256)
    enc = {T.Q4_K: lambda b: encode_q45_k(b, False), T.Q5_K: lambda b: encode_q45_k(b, True), T.Q6_K: encode_q6_k}[qtype](blocks)
    return enc.reshape(a.shape[0], -1), qtype


# ------------------------------------------------------------------------------------- conversion
def reorder_v(t, dim, nk, r, hd):
    """grouped-by-K -> tiled value heads along `dim` (llama.cpp's _reorder_v_heads)."""
    shape = list(t.shape)
    new = shape[:dim] + [nk, r, hd] + shape[dim + 1:]
    t = t.reshape(new)
    perm = list(range(len(new)))
    perm[dim], perm[dim + 1] = perm[dim + 1], perm[dim]
    return np.ascontiguousarray(t.transpose(perm)).reshape(shape)


def unreorder_v(t, dim, nk, r, hd):
    shape = list(t.shape)
    new = shape[:dim] + [r, nk, hd] + shape[dim + 1:]
    t = t.reshape(new)
    perm = list(range(len(new)))
    perm[dim], perm[dim + 1] = perm[dim + 1], perm[dim]
    return np.ascontiguousarray(t.transpose(perm)).reshape(shape)


NEXTN = {"eh_proj": gguf.MODEL_TENSOR.NEXTN_EH_PROJ, "enorm": gguf.MODEL_TENSOR.NEXTN_ENORM,
         "hnorm": gguf.MODEL_TENSOR.NEXTN_HNORM, "shared_head.norm": gguf.MODEL_TENSOR.NEXTN_SHARED_HEAD_NORM}


def to_gguf_tensors(w, cfg):
    """HF name -> f32 array  =>  list of (gguf name, f32 array), as llama.cpp's converter yields them."""
    L, nmtp = cfg["num_hidden_layers"], cfg.get("mtp_num_hidden_layers", 0)
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    r = nv // nk
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN35, L + nmtp)
    out = []
    for name, a in w.items():
        if name.startswith("mtp."):
            if "layers." in name:
                bid = int(name.split(".")[2])
                name = name.replace(f"mtp.layers.{bid}", f"model.layers.{bid + L}")
            else:
                stem, suffix = name.rsplit(".", 1)
                tmpl = {"mtp.fc": "model.layers.{bid}.eh_proj", "mtp.pre_fc_norm_embedding": "model.layers.{bid}.enorm",
                        "mtp.pre_fc_norm_hidden": "model.layers.{bid}.hnorm",
                        "mtp.norm": "model.layers.{bid}.shared_head.norm"}[stem]
                name = tmpl.format(bid=L) + "." + suffix
        if r > 1 and "linear_attn." in name:
            if ".in_proj_qkv." in name:
                q = 2 * nk * dk
                a = np.concatenate([a[:q], reorder_v(a[q:], 0, nk, r, dv)])
            elif ".in_proj_z." in name:
                a = reorder_v(a, 0, nk, r, dv)
            elif ".in_proj_a." in name or ".in_proj_b." in name:
                a = reorder_v(a, 0, nk, r, 1)
            elif ".A_log" in name or ".dt_bias" in name:
                a = reorder_v(a[:, None], 0, nk, r, 1)[:, 0]
            elif ".conv1d" in name:
                a = a.squeeze()
                q = 2 * nk * dk
                a = np.concatenate([a[:q], reorder_v(a[q:], 0, nk, r, dv)])
            elif ".out_proj." in name:
                a = reorder_v(a, 1, nk, r, dv)
        if name.endswith(".A_log"):
            a = -np.exp(a)
        elif name.endswith(".dt_bias"):
            name = name.rpartition(".dt_bias")[0] + ".dt_proj.bias"
        elif "conv1d" in name:
            a = a.squeeze()
        elif name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
            a = a + 1
        new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:  # gguf releases whose QWEN35 list predates the NextN tensors: llama.cpp's names
            for stem, tensor in NEXTN.items():
                if name == f"model.layers.{L}.{stem}.weight":
                    new = gguf.TENSOR_NAMES[tensor].format(bid=L) + ".weight"
        assert new is not None, name
        out.append((new, a.astype(np.float32)))
    return out


def add_tokenizer(writer, tok_dir, cfg):
    tj = json.load(open(os.path.join(tok_dir, "tokenizer.json")))
    tc = json.load(open(os.path.join(tok_dir, "tokenizer_config.json")))
    vocab = dict(tj["model"]["vocab"])
    added = {t["content"]: t for t in tj["added_tokens"]}
    for t in tj["added_tokens"]:
        vocab[t["content"]] = t["id"]
    n = max(vocab.values()) + 1
    rev = {i: s for s, i in vocab.items()}
    tokens, types = [], []
    for i in range(n):
        if i not in rev:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif rev[i] in added:
            tokens.append(rev[i])
            types.append(gguf.TokenType.CONTROL if added[rev[i]]["special"] else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(rev[i])
            types.append(gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("gpt2")
    pre = tj["pre_tokenizer"]
    if pre["type"] == "ByteLevel":  # GPT-2's own regex (the e2e tests' small tokenizer)
        writer.add_tokenizer_pre("gpt-2")
    else:
        regex = pre["pretokenizers"][0]["pattern"]["Regex"]
        writer.add_tokenizer_pre("qwen35" if "\\p{M}" in regex else "qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    writer.add_token_merges(merges)
    eos = tc.get("eos_token")
    eos = eos["content"] if isinstance(eos, dict) else eos
    if eos in vocab:
        writer.add_eos_token_id(vocab[eos])
    pad = tc.get("pad_token")
    pad = pad["content"] if isinstance(pad, dict) else pad
    if pad in vocab:
        writer.add_pad_token_id(vocab[pad])
    writer.add_add_bos_token(False)
    jinja = os.path.join(tok_dir, "chat_template.jinja")
    if os.path.exists(jinja):  # newer checkpoints keep it beside tokenizer_config.json
        writer.add_chat_template(open(jinja).read())
    elif "chat_template" in tc:
        writer.add_chat_template(tc["chat_template"])


def load_checkpoint(hf_dir):
    """Every tensor of a checkpoint directory: model.safetensors, or the shards its index names."""
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if not os.path.exists(index):
        return load_st(os.path.join(hf_dir, "model.safetensors"))
    w = {}
    for shard in sorted(set(json.load(open(index))["weight_map"].values())):
        w.update(load_st(os.path.join(hf_dir, shard)))
    return w


def convert(hf_dir, out, qtype, tokenizer_dir=None):
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    w = load_checkpoint(hf_dir)
    L, nmtp = cfg["num_hidden_layers"], cfg.get("mtp_num_hidden_layers", 0)
    writer = gguf.GGUFWriter(out, "qwen35")
    writer.add_block_count(L + nmtp)
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_key_length(cfg["head_dim"])
    writer.add_value_length(cfg["head_dim"])
    writer.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    writer.add_ssm_state_size(cfg["linear_key_head_dim"])
    writer.add_ssm_group_count(cfg["linear_num_key_heads"])
    writer.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
    writer.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    writer.add_full_attention_interval(cfg.get("full_attention_interval", 4))
    writer.add_rope_dimension_count(int(cfg["head_dim"] * cfg["rope_parameters"]["partial_rotary_factor"]))
    writer.add_rope_dimension_sections(list(cfg["rope_parameters"]["mrope_section"]) + [0])
    if nmtp:
        writer.add_nextn_predict_layers(nmtp)
    tok_dir = tokenizer_dir or (hf_dir if os.path.exists(os.path.join(hf_dir, "tokenizer.json")) else None)
    if tok_dir:
        add_tokenizer(writer, tok_dir, cfg)
    mix = qtype
    for name, a in to_gguf_tensors(w, cfg):
        if mix == "q4_k_m":
            qtype = T.Q6_K if any(k in name for k in Q4_K_M_Q6) else T.Q4_K
        block = {T.BF16: 1, T.F16: 1, T.Q8_0: 32}.get(qtype, 256)
        if a.ndim == 2 and "ssm_conv1d" not in name and a.shape[1] % block == 0:
            data, raw = quantize(a, qtype)
        elif a.ndim == 2 and "ssm_conv1d" not in name:
            data, raw = quantize(a, T.BF16)
        else:
            data, raw = a.astype(np.float32), T.F32
        # Quantised data (BF16 too) is a byte array [rows, row bytes]; F16/F32 go as numpy floats.
        writer.add_tensor(name, data, raw_dtype=raw if raw not in (T.F32, T.F16) else None)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def oracle(gguf_path, hf_dir, out):
    """The HF directory whose weights are the GGUF's, decoded by gguf's dequantiser and the converter's
    transforms undone here (2-D weights rounded to bf16, the rest f32): what our GGUF loader must read."""
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    L = cfg["num_hidden_layers"]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    r = nv // nk
    by_gguf = {}
    reader = gguf.GGUFReader(gguf_path)
    for t in reader.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        by_gguf[t.name] = a.reshape([int(x) for x in reversed(t.shape)])
    hf_names = list(load_st(os.path.join(hf_dir, "model.safetensors")))
    gg = dict(to_gguf_names(hf_names, cfg))
    tensors = {}
    for hf in hf_names:
        a = by_gguf[gg[hf]]
        if hf.endswith("norm.weight") and not hf.endswith("linear_attn.norm.weight") or ".pre_fc_norm_" in hf:
            a = a - np.float32(1)
        if hf.endswith("A_log"):
            a = np.log(-a.astype(np.float64)).astype(np.float32)
        if r > 1 and "linear_attn." in hf:
            if "in_proj_qkv" in hf or "conv1d" in hf:
                q = 2 * nk * dk
                a = np.concatenate([a[:q], unreorder_v(a[q:], 0, nk, r, dv)])
            elif "in_proj_z" in hf:
                a = unreorder_v(a, 0, nk, r, dv)
            elif "in_proj_a" in hf or "in_proj_b" in hf:
                a = unreorder_v(a, 0, nk, r, 1)
            elif "A_log" in hf or "dt_bias" in hf:
                a = unreorder_v(a[:, None], 0, nk, r, 1)[:, 0]
            elif "out_proj" in hf:
                a = unreorder_v(a, 1, nk, r, dv)
        if "conv1d" in hf:
            a = a[:, None, :]
        tensors[hf] = (a, "BF16" if a.ndim == 2 else "F32")
    os.makedirs(out, exist_ok=True)
    save_st(os.path.join(out, "model.safetensors"), tensors)
    for f in os.listdir(hf_dir):
        if f != "model.safetensors":
            shutil.copy(os.path.join(hf_dir, f), os.path.join(out, f))


def to_gguf_names(hf_names, cfg):
    dummy = {n: np.zeros(8 if ("A_log" in n or "dt_bias" in n) else (8, 1, 4) if "conv1d" in n else (1,), np.float32)
             for n in hf_names}
    # Names only: run the renaming part of the conversion on placeholder arrays (reorders skipped).
    c = dict(cfg, linear_num_value_heads=cfg["linear_num_key_heads"])
    return [(hf, g) for hf, (g, _) in zip(hf_names, to_gguf_tensors(dummy, c))]


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("random")
    a.add_argument("out")
    a.add_argument("--hidden", type=int, default=256)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--tokenizer-dir")
    c = sub.add_parser("convert")
    c.add_argument("hf_dir")
    c.add_argument("out")
    c.add_argument("--type", default="q4_k", choices=TYPES)
    c.add_argument("--tokenizer-dir")
    o = sub.add_parser("oracle")
    o.add_argument("gguf")
    o.add_argument("hf_dir")
    o.add_argument("out")
    args = ap.parse_args()
    if args.cmd == "random":
        make_random(args.out, args.hidden, args.seed, args.tokenizer_dir)
    elif args.cmd == "convert":
        convert(args.hf_dir, args.out, TYPES[args.type], args.tokenizer_dir)
    else:
        oracle(args.gguf, args.hf_dir, args.out)


if __name__ == "__main__":
    main()
