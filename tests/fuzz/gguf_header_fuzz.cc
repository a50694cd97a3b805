// libFuzzer target for the GGUF reader (quant/gguf_reader.h): any byte string must give an error
// status with a message, or a header whose tensors all lie inside the input and dequantise
// (quant/gguf_dequant.h) without a crash or sanitizer report. Seeds (corpus/gguf_header_fuzz): small
// files written by the gguf package (F32, BF16, Q8_0, Q4_K, Q5_K, Q6_K tensors, metadata of every
// value type) and cuts of them.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "quant/gguf_dequant.h"
#include "quant/gguf_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = sparkserve::quant::ParseGgufHeader({data, size}, "fuzz.gguf");
  if (!h.ok()) {
    if (h.status().message().empty()) std::abort();  // every error must say what is wrong
    return 0;
  }
  for (const auto& t : h->tensors) {
    if (h->data_start > size || t.offset > size - h->data_start || t.bytes > size - h->data_start - t.offset) {
      std::fprintf(stderr, "accepted tensor '%s' outside the input\n", t.name.c_str());
      std::abort();
    }
    if (t.elements > (1 << 20)) continue;  // bounded work per input
    std::vector<float> out(static_cast<size_t>(t.elements));
    const auto st = sparkserve::quant::DequantizeGgml(t.type, {data + h->data_start + t.offset, static_cast<size_t>(t.bytes)},
                                                       out.data(), t.elements);
    if (!st.ok()) std::abort();  // a parsed tensor's bytes always fit its type
  }
  return 0;
}
