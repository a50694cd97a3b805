#!/usr/bin/env python3
"""Cross-check of `sparkserve quantize` against the compressed-tensors library (not in CI: needs torch).

For each built-in recipe (nvfp4-mixed, nvfp4, fp8) this quantises the tiny random demo model with our
binary, then:
  * lets the library decide each module's scheme from our config.json (QuantizationConfig parsed by the
    library, apply_quantization_config on the transformers Qwen3_5ForCausalLM built on the meta device),
    and checks it is the format our reader reports (quantize_dequant_dump's formats.json);
  * decompresses every quantised module with the library's own compressor for its format
    (BaseCompressor registry -> decompress, the path ModelCompressor uses) and checks the result equals,
    bit for bit, what our reader dequantises (QuantizedLinear::DequantizeToF32); dense modules are
    compared as stored.
  * checks that the calibration tensors (NVFP4 `input_global_scale` for W4A4, `k_scale`/`v_scale` with
    kv_cache_scheme) are exactly the parameters the library registers for our config (names, shapes,
    dtypes), with finite positive values; and none of them after `--no-calib`;
  * checks that our evaluation's simulated W4A4 (model/activation_fake_quant.h, through
    build/tests/calib_act_qdq_dump) QDQs random activations exactly as the library's forward_quantize
    does with our input_global_scale, and FP8 KV as the library's k/v QDQ with our k_scale/v_scale.
MTP modules (mtp.*) are not part of the transformers model; they are dense in every built-in recipe
and are checked like any dense module (their attention's k/v scales are ours only).

    /work/torchenv/bin/python tests/golden/check_ct_roundtrip.py [--build-dir build] [--record FILE]

--record writes the report (default tests/golden/ct_roundtrip_result.txt). Exit status 1 on any mismatch.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import compressed_tensors
import torch
import transformers
from compressed_tensors.compressors import BaseCompressor
from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
from compressed_tensors.quantization.lifecycle.forward import fake_quantize, forward_quantize
from safetensors.torch import load_file, save_file
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

REPO = pathlib.Path(__file__).resolve().parents[2]


def sh(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed:\n{r.stderr}")
    return r.stdout


def load_all(d):
    index = d / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    out = {}
    for f in files:
        out.update(load_file(d / f))
    return out


def check_activation_qdq(model, tensors, qconfig, model_dir, build, log):
    """Library QDQ of random activations with our scales == our simulation's; returns mismatches."""
    gen = torch.Generator().manual_seed(0)
    inputs, lib = {}, {}
    for name, m in model.named_modules():
        gs = tensors.get(f"{name}.input_global_scale")
        scheme = getattr(m, "quantization_scheme", None)
        if gs is None or scheme is None or scheme.input_activations is None:
            continue
        # Rows at three magnitudes (plus zeros), so groups land in every part of the fp8 scale range.
        x = torch.randn(4, m.in_features, generator=gen) * torch.tensor([[0.01], [1.0], [30.0], [0.0]])
        m.input_global_scale = torch.nn.Parameter(gs.clone(), requires_grad=False)
        inputs[name] = x
        lib[name] = forward_quantize(m, x.clone(), "input", scheme.input_activations)
    if qconfig.kv_cache_scheme is not None:
        for n, t in tensors.items():
            if n.endswith(".k_scale") or n.endswith(".v_scale"):
                attn, kv = n[: -len(".k_scale")], n[-7]
                x = torch.randn(8, 64, generator=gen) * 3.0
                inputs[f"{attn}.{kv}"] = x
                lib[f"{attn}.{kv}"] = fake_quantize(x.clone(), t.to(torch.float32), None, qconfig.kv_cache_scheme)
    if not inputs:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        save_file(inputs, str(tmp / "in.safetensors"))
        sh(build / "tests/calib_act_qdq_dump", model_dir, tmp / "in.safetensors", tmp / "out.safetensors")
        ours = load_file(str(tmp / "out.safetensors"))
    bad = 0
    for n in sorted(inputs):
        if not torch.equal(ours[n], lib[n].to(torch.float32)):
            d = (ours[n] - lib[n]).abs().max().item()
            log(f"  MISMATCH activation QDQ {n}: max |ours - library| {d}")
            bad += 1
    log(f"  simulated activation QDQ: {len(inputs)} tensors ({sum(not n.endswith(('.k', '.v')) for n in inputs)} "
        f"NVFP4 inputs, {sum(n.endswith(('.k', '.v')) for n in inputs)} FP8 K/V) equal to the library's, {bad} mismatches")
    return bad


def check(model_dir, dump_dir, log, build):
    config = json.loads((model_dir / "config.json").read_text())
    qconfig = QuantizationConfig.model_validate(config["quantization_config"])
    text_config = Qwen3_5TextConfig(**{k: v for k, v in config.items() if k != "quantization_config"})
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(text_config)
    apply_quantization_config(model, qconfig)
    ours = load_file(dump_dir / "dequant.safetensors")
    our_formats = json.loads((dump_dir / "formats.json").read_text())
    tensors = load_all(model_dir)
    modules = {n: m for n, m in model.named_modules() if isinstance(m, (torch.nn.Linear, torch.nn.Embedding))}
    if config.get("tie_word_embeddings") and "lm_head" not in our_formats:
        modules.pop("lm_head", None)  # tied: no lm_head tensors of its own
    bad = 0
    counts = {}
    for name, m in sorted(modules.items()):
        scheme = getattr(m, "quantization_scheme", None)
        if scheme is None or scheme.weights is None:
            lib = tensors[f"{name}.weight"].to(torch.float32)
            fmt = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}[tensors[f"{name}.weight"].dtype]
        else:
            comp = BaseCompressor.get_value_from_registry(scheme.format)
            sd = {p: tensors[f"{name}.{p}"] for p in comp.compression_param_names(scheme) if f"{name}.{p}" in tensors}
            lib = comp.decompress(sd, scheme)["weight"].to(torch.float32)
            fmt = {"nvfp4-pack-quantized": "nvfp4", "float-quantized": "fp8", "naive-quantized": "fp8"}[scheme.format]
        counts[fmt] = counts.get(fmt, 0) + 1
        if our_formats.get(name) != fmt:
            log(f"  MISMATCH {name}: library format {fmt}, our reader {our_formats.get(name)}")
            bad += 1
            continue
        mine = ours[f"{name}.weight"]
        if mine.shape != lib.shape or not torch.equal(mine, lib):
            diff = (mine - lib).abs().max().item() if mine.shape == lib.shape else float("nan")
            log(f"  MISMATCH {name} ({fmt}): shapes {tuple(mine.shape)} / {tuple(lib.shape)}, max |diff| {diff}")
            bad += 1
    # Modules outside the transformers model (MTP): our reader's view must equal the stored dense weight.
    extra = sorted(set(our_formats) - set(modules))
    for name in extra:
        if our_formats[name] in ("nvfp4", "fp8"):
            log(f"  MISMATCH {name}: quantised but not a module of the transformers model")
            bad += 1
        elif not torch.equal(ours[f"{name}.weight"], tensors[f"{name}.weight"].to(torch.float32)):
            log(f"  MISMATCH {name}: dense weight differs")
            bad += 1
    # Calibration parameters: what the library registers for our config == what we wrote.
    suffixes = (".input_global_scale", ".k_scale", ".v_scale", ".input_scale")
    lib_params = {n: p for n, p in model.named_parameters() if n.endswith(suffixes)}
    ours_params = {n: t for n, t in tensors.items() if n.endswith(suffixes) and not n.startswith("mtp.")}
    for n in sorted(set(lib_params) ^ set(ours_params)):
        log(f"  MISMATCH {n}: {'registered by the library only' if n in lib_params else 'in our checkpoint only'}")
        bad += 1
    for n in sorted(set(lib_params) & set(ours_params)):
        p, t = lib_params[n], ours_params[n]
        if tuple(p.shape) != tuple(t.shape) or p.dtype != t.dtype or not (torch.isfinite(t).all() and (t > 0).all()):
            log(f"  MISMATCH {n}: library {tuple(p.shape)} {p.dtype}, ours {tuple(t.shape)} {t.dtype} = {t.tolist()}")
            bad += 1
    n_gs = sum(n.endswith(".input_global_scale") for n in ours_params)
    n_kv = sum(n.endswith(".k_scale") for n in ours_params)
    log(f"  calibration tensors: {n_gs} input_global_scale, {n_kv} k/v scale pairs, as the library registers them")
    bad += check_activation_qdq(model, tensors, qconfig, model_dir, build, log)
    log(f"  {len(modules)} modules checked against the library ({', '.join(f'{k}: {v}' for k, v in sorted(counts.items()))}), "
        f"{len(extra)} MTP modules dense, {bad} mismatches")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=str(REPO / "build"))
    ap.add_argument("--record", default=str(REPO / "tests/golden/ct_roundtrip_result.txt"))
    a = ap.parse_args()
    build = pathlib.Path(a.build_dir)
    lines = []

    def log(s):
        print(s)
        lines.append(s)

    log(f"compressed-tensors {compressed_tensors.__version__}, transformers {transformers.__version__}, "
        f"torch {torch.__version__}")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        sh(build / "bin/sparkserve", "demo-model", tmp / "src", "--shape", "tiny", "--seed", "3", "--quiet")
        for recipe, extra in (("nvfp4-mixed", []), ("nvfp4-mixed", ["--no-calib"]), ("nvfp4", []), ("fp8", [])):
            label = " ".join([recipe, *extra])
            out, dump = tmp / label.replace(" ", "_"), tmp / f"{label.replace(' ', '_')}-dump"
            sh(build / "bin/sparkserve", "quantize", tmp / "src", out, "--recipe", recipe, "--quiet",
               "--shard-size-mb", "1", "--calib-max-tokens", "128", *extra)
            dump.mkdir()
            sh(build / "tests/quantize_dequant_dump", out, dump)
            log(f"recipe {label} ({'weight-only' if extra else 'calibrated'}):")
            bad += check(out, dump, log, build)
    log("PASS: every tensor decompresses to exactly what our reader dequantises" if bad == 0 else f"FAIL: {bad} mismatches")
    pathlib.Path(a.record).write_text("\n".join(lines) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
