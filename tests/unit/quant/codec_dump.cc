// quant_codec_dump: exposes our E2M1/E4M3 codecs to the ml_dtypes oracle test
// (tests/golden/test_quant_codecs.py).
//   quant_codec_dump decode-e4m3|decode-e2m1   -> the f32 bit pattern of every code, one hex per line
//   quant_codec_dump encode-e4m3|encode-e2m1   stdin: raw little-endian f32; stdout: one u8 code each
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/half.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace q = sparkserve::quant;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: quant_codec_dump decode-e4m3|decode-e2m1|encode-e4m3|encode-e2m1\n");
    return 2;
  }
  const std::string_view mode = argv[1];
  if (mode == "decode-e4m3" || mode == "decode-e2m1") {
    const int n = mode == "decode-e4m3" ? 256 : 16;
    for (int c = 0; c < n; ++c) {
      const float v = n == 256 ? q::E4M3ToF32(static_cast<uint8_t>(c)) : q::E2M1ToF32(static_cast<uint8_t>(c));
      std::printf("%08x\n", sparkserve::core::FloatBits(v));
    }
    return 0;
  }
  if (mode == "encode-e4m3" || mode == "encode-e2m1") {
    std::vector<float> in;
    float buf[1024];
    size_t got;
    while ((got = std::fread(buf, sizeof(float), 1024, stdin)) > 0) in.insert(in.end(), buf, buf + got);
    std::vector<uint8_t> out(in.size());
    for (size_t i = 0; i < in.size(); ++i) out[i] = mode == "encode-e4m3" ? q::F32ToE4M3(in[i]) : q::F32ToE2M1(in[i]);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  }
  std::fprintf(stderr, "unknown mode '%s'\n", argv[1]);
  return 2;
}
