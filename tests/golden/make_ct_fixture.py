#!/usr/bin/env python3
"""Builds tests/golden/ct_fixture/: a tiny model-like checkpoint quantised and compressed by the
compressed-tensors library itself, plus the library's own decompression of every weight.

Needs torch + compressed-tensors (CPU is enough), e.g.
    /work/torchenv/bin/python tests/golden/make_ct_fixture.py [OUT_DIR]
Writes into OUT_DIR (default tests/golden/ct_fixture):
    config.json          with the quantization_config the library wrote (ModelCompressor.update_config)
    model.safetensors    the compressed state dict (what llm-compressor would save)
    decompressed.safetensors  "<module>.weight" as f32: the library's decompression of model.safetensors
                          (its compressor classes' decompress(), the same path ModelCompressor and the
                          model-free CompressedTensorsDequantizer use), and dense weights as stored
    expected.json        per module: format (nvfp4|fp8|bf16|f16|f32), logical shape [out, in], the config
                          group and, for fp8, the scale layout (tensor|channel|block), as the library
                          resolved them (apply_quantization_config's matching)

The modules exercise: NVFP4 W4A16 through a class target ("Linear"), NVFP4 W4A4 with an input global
scale (regex target), FP8 weight-only per channel (exact-name target, naive-quantized), FP8 W8A8
per tensor with a static input scale on an f32 layer (float-quantized), FP8 128x128 blocks on an f16
layer whose shape is not a multiple of 128, and dense layers left alone through `ignore` (a name and a
regex), an Embedding (not matched by "Linear"), norms, a conv1d and A_log.
"""
import json
import pathlib
import sys

import compressed_tensors
import torch
from compressed_tensors.compressors import BaseCompressor, ModelCompressor
from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig, QuantizationScheme,
                                             QuantizationStatus, apply_quantization_config)
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
from safetensors.torch import load_file, save_file

SEED = 1234
H = 48  # hidden size


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = torch.nn.Linear(H, 64, bias=False)
        self.k_proj = torch.nn.Linear(H, 32, bias=False)
        self.o_proj = torch.nn.Linear(64, H, bias=False)


class LinearAttn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj_qkv = torch.nn.Linear(H, 96, bias=False)
        self.conv1d = torch.nn.Conv1d(96, 96, 4, groups=96, bias=False)
        self.A_log = torch.nn.Parameter(torch.zeros(4))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.down_proj = torch.nn.Linear(96, H, bias=False)
        self.up_proj = torch.nn.Linear(H, 96, bias=False).to(torch.float32)
        self.gate_proj = torch.nn.Linear(136, 130, bias=False).to(torch.float16)  # 128x128 blocks, padded


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = torch.nn.LayerNorm(H, bias=False)
        self.self_attn = Attn()
        self.linear_attn = LinearAttn()
        self.mlp = Mlp()


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(64, H)
        self.layers = torch.nn.ModuleList([Layer()])
        self.norm = torch.nn.LayerNorm(H, bias=False)


class TinyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()
        self.lm_head = torch.nn.Linear(H, 64, bias=False)


def build_model():
    torch.manual_seed(SEED)
    m = TinyModel()
    # Default to bf16 like a real checkpoint; up_proj stays f32 and gate_proj f16 on purpose.
    for name, p in m.named_parameters():
        if "up_proj" in name:
            p.data = torch.randn_like(p, dtype=torch.float32) * 0.05
        elif "gate_proj" in name:
            p.data = (torch.randn(p.shape) * 0.05).to(torch.float16)
        else:
            p.data = (torch.randn(p.shape) * 0.05).to(torch.bfloat16)
    m.model.norm.weight.data = m.model.norm.weight.data.float()
    m.model.layers[0].linear_attn.A_log.data = m.model.layers[0].linear_attn.A_log.data.float()
    # A few outliers so the scales differ across groups/channels/blocks.
    with torch.no_grad():
        for lin in (m.model.layers[0].self_attn.q_proj, m.model.layers[0].mlp.down_proj, m.model.layers[0].mlp.gate_proj):
            w = lin.weight
            w[1, 3] = w[1, 3] * 40
            w[-1, -1] = -w[-1, -1] * 25
    return m


def fp8_args(strategy, block=None):
    return QuantizationArgs(num_bits=8, type="float", symmetric=True, strategy=strategy, block_structure=block,
                            dynamic=False)


def quant_config():
    nvfp4_w = dict(num_bits=4, type="float", symmetric=True, strategy="tensor_group", group_size=16, dynamic=False,
                   scale_dtype=torch.float8_e4m3fn, zp_dtype=torch.float8_e4m3fn)
    groups = {
        # NVFP4 weight-only, through the class target: q_proj and o_proj.
        "group_0": QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**nvfp4_w)),
        # NVFP4 W4A4 (static input global scale) through a regex.
        "group_1": QuantizationScheme(
            targets=["re:.*self_attn\\.k_proj$"], weights=QuantizationArgs(**nvfp4_w),
            input_activations=QuantizationArgs(num_bits=4, type="float", symmetric=True, strategy="tensor_group",
                                               group_size=16, dynamic="local", scale_dtype=torch.float8_e4m3fn,
                                               zp_dtype=torch.float8_e4m3fn)),
        # FP8 weight-only per channel, exact module name (naive-quantized).
        "group_2": QuantizationScheme(targets=["model.layers.0.mlp.down_proj"], weights=fp8_args("channel")),
        # FP8 W8A8 per tensor with a static input scale (float-quantized), regex.
        "group_3": QuantizationScheme(targets=["re:.*up_proj"], weights=fp8_args("tensor"),
                                      input_activations=QuantizationArgs(num_bits=8, type="float", symmetric=True,
                                                                         strategy="tensor", dynamic=False)),
        # FP8 128x128 blocks with dynamic per-group-128 activations (float-quantized).
        "group_4": QuantizationScheme(targets=["re:.*gate_proj"], weights=fp8_args("block", [128, 128]),
                                      input_activations=QuantizationArgs(num_bits=8, type="float", symmetric=True,
                                                                         strategy="group", group_size=128,
                                                                         dynamic=True)),
    }
    return QuantizationConfig(config_groups=groups, ignore=["lm_head", "re:.*linear_attn.*"],
                              quantization_status=QuantizationStatus.INITIALIZED)


def calibrate(module):
    """Memoryless min-max weight observer, as llm-compressor's default: sets weight_scale (and the
    NVFP4 global scale) from the weight, and static activation scales from a made-up amax."""
    args = module.quantization_scheme.weights
    w = module.weight.data
    gs = None
    if args.strategy == "tensor_group":
        gs = generate_gparam(w.min(), w.max())
        g = w.reshape(w.shape[0], -1, args.group_size)
        scale, _ = calculate_qparams(g.amin(-1), g.amax(-1), args, global_scale=gs)
        module.weight_global_scale.data.copy_(gs)
    elif args.strategy == "channel":
        scale, _ = calculate_qparams(w.amin(1, keepdim=True), w.amax(1, keepdim=True), args)
    elif args.strategy == "tensor":
        scale, _ = calculate_qparams(w.min(), w.max(), args)
    elif args.strategy == "block":
        br, bc = args.block_structure
        rows, cols = -(-w.shape[0] // br), -(-w.shape[1] // bc)
        mins = torch.empty(rows, cols, dtype=w.dtype)
        maxs = torch.empty(rows, cols, dtype=w.dtype)
        for i in range(rows):
            for j in range(cols):
                blk = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc]
                mins[i, j], maxs[i, j] = blk.min(), blk.max()
        scale, _ = calculate_qparams(mins, maxs, args)
    else:
        raise ValueError(args.strategy)
    module.weight_scale.data = scale.to(module.weight_scale.dtype).reshape(module.weight_scale.shape)
    act = module.quantization_scheme.input_activations
    if act is not None and act.dynamic is False:
        module.input_scale.data.fill_(0.0123)
    if act is not None and act.dynamic == "local":
        module.input_global_scale.data.copy_(generate_gparam(torch.tensor(-3.5), torch.tensor(3.0)))


def main():
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "ct_fixture"
    out.mkdir(parents=True, exist_ok=True)
    model = build_model()
    apply_quantization_config(model, quant_config())
    quantized = {n: m for n, m in model.named_modules() if getattr(m, "quantization_scheme", None) is not None}
    for m in quantized.values():
        calibrate(m)

    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, out / "model.safetensors", metadata={"format": "pt"})
    config = {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": H,
        "intermediate_size": 96, "num_hidden_layers": 1, "layer_types": ["full_attention"], "vocab_size": 64,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    compressor.update_config(str(out))

    # The library's decompression of what was saved.
    tensors = load_file(out / "model.safetensors")
    decompressed, expected = {}, {}
    weight_modules = {n: m for n, m in model.named_modules() if isinstance(m, (torch.nn.Linear, torch.nn.Embedding))}
    for name, m in weight_modules.items():
        scheme = quantized.get(name) and quantized[name].quantization_scheme
        if scheme is None or scheme.weights is None:
            w = tensors[f"{name}.weight"]
            decompressed[f"{name}.weight"] = w.to(torch.float32)
            expected[name] = {"format": {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}[w.dtype],
                              "shape": list(w.shape), "group": None}
            continue
        comp = BaseCompressor.get_value_from_registry(scheme.format)
        sd = {p: tensors[f"{name}.{p}"] for p in comp.compression_param_names(scheme) if f"{name}.{p}" in tensors}
        w = comp.decompress(sd, scheme)["weight"]
        decompressed[f"{name}.weight"] = w.to(torch.float32).contiguous()
        group = next(g for g, s in compressor.quantization_config.config_groups.items() if s.targets == scheme.targets)
        entry = {"format": "nvfp4" if scheme.format == "nvfp4-pack-quantized" else "fp8", "shape": list(w.shape),
                 "group": group, "library_format": scheme.format, "library_dtype": str(w.dtype)}
        if entry["format"] == "fp8":
            entry["fp8_scale"] = scheme.weights.strategy
        expected[name] = entry
    save_file(decompressed, out / "decompressed.safetensors")
    (out / "expected.json").write_text(json.dumps({"compressed_tensors": compressed_tensors.__version__,
                                                   "torch": torch.__version__, "modules": expected},
                                                  indent=2, sort_keys=True) + "\n")
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"wrote {out} ({total} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
