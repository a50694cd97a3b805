// A llama.cpp `qwen35` GGUF file turned into the Hugging Face model directory our loaders read:
// config.json (qwen3_5_text layout) from the `qwen35.*` metadata, tokenizer.json /
// tokenizer_config.json (chat template) / generation_config.json from `tokenizer.*`, and
// model.safetensors with every tensor dequantised (gguf_dequant.h) under its Hugging Face name.
//
// llama.cpp's converter (convert_hf_to_gguf.py, Qwen3_5TextModel) changes some tensors; each is
// undone here: RMSNorm weights are stored +1 (all but linear_attn.norm: -1 here), A_log as
// -exp(A_log) (log(-x) here), dt_bias renamed ssm_dt.bias, conv1d squeezed to [C, K] (unsqueezed
// here), and, when linear_num_key_heads < linear_num_value_heads, the value heads reordered from
// grouped by key head to tiled (rows of in_proj_qkv's v part, in_proj_z, in_proj_a/b, A_log,
// dt_bias, conv1d's v channels; columns of out_proj: the inverse permutation here). The MTP block
// (`{arch}.nextn_predict_layers` > 0) is blk.{n_layers + i}.* plus nextn.{eh_proj, enorm, hnorm,
// shared_head_norm} -> mtp.layers.i.*, mtp.fc, mtp.pre_fc_norm_embedding/hidden, mtp.norm.
//
// 2-D weights (linears, the embedding) are written as bf16 (f32 rounded to nearest even); norms,
// A_log, dt_bias and conv1d as f32.
#pragma once
#include <string>

#include "absl/status/status.h"

namespace sparkserve::quant {

// The Hugging Face tensor name of GGUF tensor `gguf_name` ("blk.3.attn_qkv.weight" ->
// "model.layers.3.linear_attn.in_proj_qkv.weight"), given the number of main layers; "" when the
// name is not one a qwen35 file has.
std::string GgufToHfName(const std::string& gguf_name, int num_layers);

// Writes the directory for `gguf_path` into `out_dir` (created; must be empty or absent).
absl::Status WriteGgufModelDirectory(const std::string& gguf_path, const std::string& out_dir);

}  // namespace sparkserve::quant
