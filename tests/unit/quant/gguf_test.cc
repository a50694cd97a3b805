// GGUF reader: hand-built headers (valid, truncated at every byte, hostile counts and types) and
// dequantisation of hand-built blocks of every read type, checked against values worked out here
// from the block layouts (ggml's documented formulas), not by the code under test.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "gtest/gtest.h"
#include "quant/gguf_dequant.h"
#include "quant/gguf_reader.h"

namespace sparkserve::quant {
namespace {

class Bytes {
 public:
  template <typename T>
  Bytes& Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& Str(const std::string& s) {
    Put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  std::vector<uint8_t> b;
};

// A GGUF v3 file: two metadata entries, one F32 tensor [2, 32] (ne = {32, 2}) and one Q8_0 [32].
std::vector<uint8_t> SmallGguf() {
  Bytes x;
  x.Put<uint32_t>(0x46554747u).Put<uint32_t>(3).Put<uint64_t>(2).Put<uint64_t>(2);
  x.Str("general.architecture").Put<uint32_t>(8).Str("qwen35");
  x.Str("tokenizer.ggml.tokens").Put<uint32_t>(9).Put<uint32_t>(8).Put<uint64_t>(2).Str("a").Str("b");
  x.Str("w").Put<uint32_t>(2).Put<uint64_t>(32).Put<uint64_t>(2).Put<uint32_t>(0).Put<uint64_t>(0);
  x.Str("q").Put<uint32_t>(1).Put<uint64_t>(32).Put<uint32_t>(8).Put<uint64_t>(256);
  while (x.b.size() % 32) x.b.push_back(0);
  for (int k = 0; k < 64; ++k) x.Put<float>(static_cast<float>(k));
  x.Put<uint16_t>(0x3800);  // d = 0.5
  for (int k = 0; k < 32; ++k) x.Put<int8_t>(static_cast<int8_t>(k - 16));
  return x.b;
}

TEST(Gguf, ParsesAValidHeader) {
  const std::vector<uint8_t> f = SmallGguf();
  auto h = ParseGgufHeader(f, "small.gguf");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->version, 3u);
  EXPECT_EQ(h->metadata.at("general.architecture").s, "qwen35");
  ASSERT_EQ(h->metadata.at("tokenizer.ggml.tokens").array.size(), 2u);
  EXPECT_EQ(h->metadata.at("tokenizer.ggml.tokens").array[1].s, "b");
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->tensors[0].shape(), (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(h->tensors[0].bytes, 256u);
  EXPECT_EQ(h->tensors[1].bytes, 34u);
  std::vector<float> y(32);
  ASSERT_TRUE(DequantizeGgml(8, std::span(f).subspan(h->data_start + 256, 34), y.data(), 32).ok());
  for (int k = 0; k < 32; ++k) EXPECT_EQ(y[k], 0.5f * static_cast<float>(k - 16));
}

TEST(Gguf, EveryTruncationIsAnError) {
  const std::vector<uint8_t> f = SmallGguf();
  for (size_t n = 0; n < f.size(); ++n) {
    auto h = ParseGgufHeader(std::span(f.data(), n), "cut.gguf");
    EXPECT_FALSE(h.ok()) << n;
  }
}

TEST(Gguf, HostileHeadersAreErrors) {
  auto with = [](size_t at, std::vector<uint8_t> patch) {
    std::vector<uint8_t> f = SmallGguf();
    std::memcpy(f.data() + at, patch.data(), patch.size());
    return ParseGgufHeader(f, "bad.gguf").status();
  };
  auto has = [](const absl::Status& s, const std::string& what) {
    return !s.ok() && std::string(s.message()).find(what) != std::string::npos;
  };
  EXPECT_TRUE(has(with(0, {'G', 'G', 'U', 'X'}), "magic"));
  EXPECT_TRUE(has(with(4, {9, 0, 0, 0}), "version 9"));
  EXPECT_TRUE(has(with(8, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}), "cannot fit"));
  EXPECT_TRUE(has(with(16, {0, 0, 0, 0, 0, 0, 0, 0x10}), "cannot fit"));
  // The first key's length: absurd.
  EXPECT_TRUE(has(with(24, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), "absurd"));
  // The first value's type (after the 8-byte length and 20 bytes of key).
  EXPECT_TRUE(has(with(52, {77, 0, 0, 0}), "unknown value type"));
  // The tokens array's count.
  const size_t arr = 24 + 8 + 20 + 4 + 8 + 6 + 8 + 21 + 4 + 4;
  EXPECT_TRUE(has(with(arr, {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}), "cannot fit"));
  // Tensor "w": n_dims, a dimension, its type, its offset.
  const size_t w = arr + 8 + 9 + 9 + 8 + 1;
  EXPECT_TRUE(has(with(w, {5, 0, 0, 0}), "dimensions"));
  EXPECT_TRUE(has(with(w + 4, {0, 0, 0, 0, 0, 0, 0, 0}), "absurd"));
  EXPECT_TRUE(has(with(w + 20, {2, 0, 0, 0}), "not read here"));
  EXPECT_TRUE(has(with(w + 24, {0, 1, 0, 0, 0, 0, 0, 0}), "run past"));
  EXPECT_TRUE(has(with(w + 24, {7, 0, 0, 0, 0, 0, 0, 0}), "aligned"));
  // Tensor "q" placed over "w".
  EXPECT_TRUE(has(with(w + 32 + 9 + 4 + 8 + 4, {0x20, 0, 0, 0, 0, 0, 0, 0}), "overlap"));
}

uint16_t F16(float v) {
  // The test's values are exact in f16 (small dyadic rationals).
  uint16_t h = 0;
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) {
    if (core::F16ToF32(static_cast<uint16_t>(bits)) == std::fabs(v)) { h = static_cast<uint16_t>(bits); break; }
  }
  return v < 0 ? static_cast<uint16_t>(h | 0x8000) : h;
}

// Packs 8 six-bit scales and mins as the K-quants lay them out in 12 bytes.
void PackScaleMin(const int sc[8], const int m[8], uint8_t* q) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>(sc[j] & 63);
    q[j + 4] = static_cast<uint8_t>(m[j] & 63);
  }
  for (int j = 4; j < 8; ++j) {
    q[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
    q[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    q[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
  }
}

TEST(Gguf, DequantizesQ4KAndQ5K) {
  const int sc[8] = {1, 7, 63, 20, 33, 48, 17, 5}, m[8] = {0, 3, 40, 63, 18, 50, 9, 31};
  const float d = 0.25f, dmin = 0.125f;
  for (bool five : {false, true}) {
    std::vector<uint8_t> b(five ? 176 : 144, 0);
    const uint16_t hd = F16(d), hm = F16(dmin);
    std::memcpy(b.data(), &hd, 2);
    std::memcpy(b.data() + 2, &hm, 2);
    PackScaleMin(sc, m, b.data() + 4);
    uint8_t* qh = five ? b.data() + 16 : nullptr;
    uint8_t* qs = b.data() + (five ? 48 : 16);
    std::vector<float> want(256);
    for (int e = 0; e < 256; ++e) {
      const int sub = e / 32, chunk = e / 64, l = e % 32, high = sub % 2;
      const int q4 = (e * 11 + 3) % 16, hb = five ? (e * 7) % 3 == 0 : 0;
      qs[chunk * 32 + l] |= static_cast<uint8_t>(q4 << (high ? 4 : 0));
      if (hb) qh[l] |= static_cast<uint8_t>(1 << (2 * chunk + high));
      want[e] = d * sc[sub] * static_cast<float>(q4 + 16 * hb) - dmin * m[sub];
    }
    std::vector<float> y(256);
    ASSERT_TRUE(DequantizeGgml(five ? 13 : 12, b, y.data(), 256).ok());
    for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], want[e]) << (five ? "Q5_K " : "Q4_K ") << e;
  }
}

TEST(Gguf, DequantizesQ6K) {
  std::vector<uint8_t> b(210, 0);
  const float d = 0.5f;
  int8_t scales[16];
  for (int k = 0; k < 16; ++k) scales[k] = static_cast<int8_t>(k * 9 - 70);
  std::memcpy(b.data() + 192, scales, 16);
  const uint16_t hd = F16(d);
  std::memcpy(b.data() + 208, &hd, 2);
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, p = e % 128, g = p / 32, l = p % 32;
    const int q = (e * 37 + 5) % 64;
    uint8_t* ql = b.data() + 64 * n;
    uint8_t* qh = b.data() + 128 + 32 * n;
    ql[l + (g % 2) * 32] |= static_cast<uint8_t>((q & 0xF) << (g >= 2 ? 4 : 0));
    qh[l] |= static_cast<uint8_t>((q >> 4) << (2 * g));
    want[e] = d * scales[8 * n + l / 16 + 2 * g] * static_cast<float>(q - 32);
  }
  std::vector<float> y(256);
  ASSERT_TRUE(DequantizeGgml(14, b, y.data(), 256).ok());
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], want[e]) << e;
}

TEST(Gguf, DequantizesFloatTypesAndRefusesBadSizes) {
  const uint16_t bf[2] = {0x3f80, 0xc040};  // 1, -3
  const uint16_t hf[2] = {0x3c00, 0xc200};  // 1, -3
  float y[2];
  ASSERT_TRUE(DequantizeGgml(30, {reinterpret_cast<const uint8_t*>(bf), 4}, y, 2).ok());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  ASSERT_TRUE(DequantizeGgml(1, {reinterpret_cast<const uint8_t*>(hf), 4}, y, 2).ok());
  EXPECT_EQ(y[1], -3.0f);
  EXPECT_FALSE(DequantizeGgml(12, {reinterpret_cast<const uint8_t*>(hf), 4}, y, 2).ok());
  EXPECT_FALSE(DequantizeGgml(2, {reinterpret_cast<const uint8_t*>(hf), 4}, y, 2).ok());
}

}  // namespace
}  // namespace sparkserve::quant
