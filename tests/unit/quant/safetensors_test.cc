// safetensors reader/writer: round trips (single file, shards), zero-copy views, and every
// validation error with a message naming the file, the tensor and the problem.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "quant/safetensors_reader.h"
#include "quant/safetensors_writer.h"
#include "tests/unit/quant/test_dir.h"

namespace sparkserve::quant {
namespace {

using core::DType;
using core::Tensor;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

Tensor Filled(core::Shape shape, DType dtype, int seed) {
  Tensor t = Tensor::Empty(std::move(shape), dtype);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(i * 31 + seed);
  return t;
}

NamedTensors Sample() {
  return {{"w.f32", Filled({3, 5}, DType::kF32, 1)},  {"w.bf16", Filled({4, 3}, DType::kBF16, 2)},
          {"w.u8", Filled({7}, DType::kU8, 3)},        {"w.fp8", Filled({2, 3}, DType::kF8E4M3, 4)},
          {"w.i64", Filled({2}, DType::kI64, 5)},      {"w.f16", Filled({3}, DType::kF16, 6)},
          {"w.i32", Filled({1, 1, 2}, DType::kI32, 7)}, {"scalar", Filled({}, DType::kF32, 8)},
          {"empty", Filled({0, 4}, DType::kF32, 9)}};
}

void ExpectSame(const Tensor& a, const Tensor& b, const std::string& name) {
  EXPECT_EQ(a.dtype(), b.dtype()) << name;
  EXPECT_EQ(a.shape(), b.shape()) << name;
  ASSERT_EQ(a.nbytes(), b.nbytes()) << name;
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << name;
}

TEST(Safetensors, SingleFileRoundTripWithMetadata) {
  TestDir dir;
  const std::string path = dir.path("one.safetensors");
  const NamedTensors in = Sample();
  ASSERT_TRUE(WriteSafetensors(path, in, {{"format", "pt"}, {"note", "ünïcode"}}).ok());
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("note"), "ünïcode");
  EXPECT_EQ(f->header().tensors.size(), in.size());
  EXPECT_EQ(f->header().data_start % 8, 0u);
  for (const auto& [name, t] : in) {
    auto got = f->Get(name);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSame(*got, t, name);
    // Files we write align every tensor to its element size.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(got->raw_data()) % core::DTypeSize(t.dtype()), 0u) << name;
  }
  EXPECT_EQ(f->Get("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(f->Get("nope").status().message()), HasSubstr("one.safetensors"));
}

TEST(Safetensors, ViewsOutliveTheFileObjectAndNeverWriteTheFile) {
  TestDir dir;
  const std::string path = dir.path("one.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"x", Filled({4}, DType::kF32, 1)}}).ok());
  Tensor view;
  {
    auto f = SafetensorsFile::Open(path);
    ASSERT_TRUE(f.ok());
    view = *f->Get("x");
  }
  ExpectSame(view, Filled({4}, DType::kF32, 1), "x");
  view.data<uint8_t>()[0] ^= 0xff;  // copy-on-write mapping
  auto again = SafetensorsFile::Open(path);
  ASSERT_TRUE(again.ok());
  ExpectSame(*again->Get("x"), Filled({4}, DType::kF32, 1), "x after writing into a view");
}

TEST(Safetensors, ShardedRoundTripThroughTheIndex) {
  TestDir dir;
  const NamedTensors in = Sample();
  auto paths = WriteShardedSafetensors(dir.path("ckpt"), in, 64, {{"format", "pt"}});
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_GT(paths->size(), 2u);
  EXPECT_THAT((*paths)[0], HasSubstr(fmt::format("model-00001-of-{:05d}.safetensors", paths->size())));
  std::ifstream idx(dir.path("ckpt/model.safetensors.index.json"));
  const nlohmann::json index = nlohmann::json::parse(idx);
  uint64_t total = 0;
  for (const auto& [n, t] : in) total += t.nbytes();
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(index["weight_map"].size(), in.size());

  auto ckpt = SafetensorsCheckpoint::Open(dir.path("ckpt"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->files().size(), paths->size());
  EXPECT_EQ(ckpt->Names().size(), in.size());
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(ckpt->Contains(name));
    ExpectSame(*ckpt->Get(name), t, name);
    EXPECT_EQ(fs::path(ckpt->FileOf(name)).filename().string(), index["weight_map"][name].get<std::string>());
    EXPECT_EQ(ckpt->Find(name)->shape, t.shape());
  }
  EXPECT_EQ(ckpt->metadata().at("format"), "pt");
  for (const std::string& p : *paths) {  // every shard respects the limit unless a tensor alone exceeds it
    auto f = SafetensorsFile::Open(p);
    ASSERT_TRUE(f.ok());
    EXPECT_TRUE(f->header().data_size <= 64 || f->header().tensors.size() == 1) << p;
  }
}

TEST(Safetensors, DirectoryWithOneModelFile) {
  TestDir dir;
  ASSERT_TRUE(WriteSafetensors(dir.path("model.safetensors"), Sample()).ok());
  auto ckpt = SafetensorsCheckpoint::Open(dir.path(""));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->Names().size(), Sample().size());
}

TEST(Safetensors, WriterRejectsBadInput) {
  TestDir dir;
  EXPECT_FALSE(WriteSafetensors(dir.path("a"), {{"x", Filled({1}, DType::kU8, 0)}, {"x", Filled({1}, DType::kU8, 0)}}).ok());
  EXPECT_FALSE(WriteSafetensors(dir.path("a"), {{"__metadata__", Filled({1}, DType::kU8, 0)}}).ok());
  EXPECT_FALSE(WriteSafetensors(dir.path("a"), {{"x", Tensor()}}).ok());
  EXPECT_FALSE(WriteShardedSafetensors(dir.path("s"), Sample(), 0).ok());
  EXPECT_FALSE(WriteSafetensors(dir.path("missing/dir/a"), Sample()).ok());
}

// ---------------------------------------------------------------- header validation

std::vector<uint8_t> RawFile(const std::string& header, size_t data_bytes, int64_t declared_len = -1) {
  std::vector<uint8_t> out(8);
  const uint64_t n = declared_len >= 0 ? static_cast<uint64_t>(declared_len) : header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0xab);
  return out;
}

std::string ParseError(const std::vector<uint8_t>& bytes) {
  auto h = ParseSafetensorsHeader(bytes, "bad.safetensors");
  EXPECT_FALSE(h.ok());
  if (h.ok()) return "";
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(h.status().message());
  EXPECT_THAT(m, HasSubstr("bad.safetensors"));
  return m;
}

TEST(SafetensorsHeader, AcceptsAMinimalValidHeader) {
  auto h = ParseSafetensorsHeader(
      RawFile(R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
              R"("__metadata__":{"k":"v"}}   )", 6),
      "ok");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->tensors[0].name, "a");  // sorted by offset
  EXPECT_EQ(h->tensors[1].shape, core::Shape{2});
  EXPECT_EQ(h->metadata.at("k"), "v");
  EXPECT_EQ(h->data_size, 6u);
  auto empty = ParseSafetensorsHeader(RawFile("{}", 0), "empty");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->tensors.empty());
}

TEST(SafetensorsHeader, RejectsTruncatedFilesAndBadLengths) {
  EXPECT_THAT(ParseError({1, 2, 3}), HasSubstr("shorter than the 8-byte header length"));
  EXPECT_THAT(ParseError(RawFile("{}", 0, 100)), HasSubstr("header length 100 runs past the end of the file"));
  EXPECT_THAT(ParseError(RawFile("{}", 0, int64_t{1} << 40)), HasSubstr("is absurd"));
  std::vector<uint8_t> huge(16, 0xff);  // length 2^64 - 1: must not wrap around
  EXPECT_THAT(ParseError(huge), HasSubstr("is absurd"));
}

TEST(SafetensorsHeader, RejectsBadTextAndJson) {
  EXPECT_THAT(ParseError(RawFile("{\"a\xff\":1}", 0)), HasSubstr("not valid UTF-8 (byte 3"));
  EXPECT_THAT(ParseError(RawFile("{\"\xc0\x80\":1}", 0)), HasSubstr("not valid UTF-8"));  // overlong NUL
  EXPECT_THAT(ParseError(RawFile("{\"\xed\xa0\x80\":1}", 0)), HasSubstr("not valid UTF-8"));  // surrogate
  EXPECT_THAT(ParseError(RawFile("{\"a\":", 0)), HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseError(RawFile("[1,2]", 0)), HasSubstr("not a JSON object"));
  EXPECT_THAT(ParseError(RawFile(R"({"a":{"dtype":"U8","shape":[[[1]]],"data_offsets":[0,1]}})", 1)),
              HasSubstr("nested deeper"));
  EXPECT_THAT(ParseError(RawFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                 R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2)),
              HasSubstr("duplicate key 'a'"));
  EXPECT_THAT(ParseError(RawFile(R"({"__metadata__":{"k":1}})", 0)), HasSubstr("value for 'k' is not a string"));
  EXPECT_THAT(ParseError(RawFile(R"({"__metadata__":[]})", 0)), HasSubstr("\"__metadata__\" is not an object"));
}

TEST(SafetensorsHeader, RejectsBadTensorEntries) {
  auto one = [](const std::string& entry, size_t data) { return RawFile("{\"t.w\":" + entry + "}", data); };
  EXPECT_THAT(ParseError(one(R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})", 8)),
              AllOf(HasSubstr("tensor 't.w'"), HasSubstr("unsupported dtype 'F64'")));
  EXPECT_THAT(ParseError(one(R"({"shape":[1],"data_offsets":[0,8]})", 8)), HasSubstr("\"dtype\""));
  EXPECT_THAT(ParseError(one(R"({"dtype":"U8","shape":[-1],"data_offsets":[0,1]})", 1)),
              HasSubstr("not a non-negative integer"));
  EXPECT_THAT(ParseError(one(R"({"dtype":"U8","shape":[1.5],"data_offsets":[0,1]})", 1)),
              HasSubstr("not a non-negative integer"));
  EXPECT_THAT(ParseError(one(R"({"dtype":"U8","shape":[4294967296,4294967296,16],"data_offsets":[0,1]})", 1)),
              HasSubstr("too large"));
  EXPECT_THAT(ParseError(one(R"({"dtype":"BF16","shape":[3,2],"data_offsets":[0,10]})", 10)),
              AllOf(HasSubstr("tensor 't.w'"), HasSubstr("hold 10 bytes but bf16[3, 2] needs 12")));
  EXPECT_THAT(ParseError(one(R"({"dtype":"U8","shape":[4],"data_offsets":[0,4]})", 2)),
              HasSubstr("outside the data section of 2 bytes"));
  EXPECT_THAT(ParseError(one(R"({"dtype":"U8","shape":[0],"data_offsets":[3,2]})", 3)), HasSubstr("end before"));
  EXPECT_THAT(ParseError(one(R"({"dtype":"U8","shape":[1],"data_offsets":[0]})", 1)), HasSubstr("[begin, end]"));
  EXPECT_THAT(ParseError(one(R"([])", 0)), HasSubstr("not an object"));
}

TEST(SafetensorsHeader, RejectsOverlapsHolesAndUncoveredData) {
  EXPECT_THAT(ParseError(RawFile(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                 R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6)),
              AllOf(HasSubstr("tensor 'b'"), HasSubstr("overlap tensor 'a'")));
  EXPECT_THAT(ParseError(RawFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                 R"("b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})", 5)),
              AllOf(HasSubstr("tensor 'b'"), HasSubstr("hole")));
  EXPECT_THAT(ParseError(RawFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", 3)), HasSubstr("hole"));
  EXPECT_THAT(ParseError(RawFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 5)),
              HasSubstr("cover 2 bytes but the data section holds 5"));
}

// ---------------------------------------------------------------- file and checkpoint errors

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(SafetensorsCheckpointErrors, MissingFilesAndBadIndex) {
  TestDir dir;
  EXPECT_EQ(SafetensorsFile::Open(dir.path("none.safetensors")).status().code(), absl::StatusCode::kNotFound);
  WriteText(dir.path("tiny.safetensors"), "abc");
  EXPECT_THAT(std::string(SafetensorsFile::Open(dir.path("tiny.safetensors")).status().message()),
              AllOf(HasSubstr("tiny.safetensors"), HasSubstr("shorter than the 8-byte")));

  auto st = SafetensorsCheckpoint::Open(dir.path(""));
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("no model.safetensors and no model.safetensors.index.json"));

  ASSERT_TRUE(WriteShardedSafetensors(dir.path("c"), Sample(), 64).ok());
  const std::string idx = dir.path("c/model.safetensors.index.json");
  nlohmann::json index = nlohmann::json::parse(std::ifstream(idx));

  nlohmann::json missing_shard = index;
  missing_shard["weight_map"]["w.f32"] = "model-00009-of-00009.safetensors";
  WriteText(idx, missing_shard.dump());
  EXPECT_THAT(std::string(SafetensorsCheckpoint::Open(dir.path("c")).status().message()),
              AllOf(HasSubstr("model-00009-of-00009.safetensors"), HasSubstr("does not exist"), HasSubstr("w.f32")));

  nlohmann::json absent = index;
  absent["weight_map"]["ghost"] = index["weight_map"]["w.f32"];
  WriteText(idx, absent.dump());
  EXPECT_THAT(std::string(SafetensorsCheckpoint::Open(dir.path("c")).status().message()),
              AllOf(HasSubstr("'ghost'"), HasSubstr("does not contain it")));

  nlohmann::json moved = index;  // w.f32 listed under a shard that does not hold it
  const std::string other = index["weight_map"]["w.u8"] != index["weight_map"]["w.f32"] ? index["weight_map"]["w.u8"]
                                                                                        : index["weight_map"]["empty"];
  moved["weight_map"]["w.f32"] = other;
  WriteText(idx, moved.dump());
  EXPECT_THAT(std::string(SafetensorsCheckpoint::Open(dir.path("c")).status().message()), HasSubstr("'w.f32'"));

  nlohmann::json escape = index;
  escape["weight_map"]["w.f32"] = "../elsewhere.safetensors";
  WriteText(idx, escape.dump());
  EXPECT_THAT(std::string(SafetensorsCheckpoint::Open(dir.path("c")).status().message()),
              HasSubstr("not a file inside the directory"));

  WriteText(idx, "{\"weight_map\": 3}");
  EXPECT_THAT(std::string(SafetensorsCheckpoint::Open(dir.path("c")).status().message()),
              AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("weight_map")));
  WriteText(idx, "{not json");
  EXPECT_THAT(std::string(SafetensorsCheckpoint::Open(dir.path("c")).status().message()), HasSubstr("not valid JSON"));
}

TEST(SafetensorsCheckpointErrors, DuplicateNamesAcrossShards) {
  TestDir dir;
  ASSERT_TRUE(WriteSafetensors(dir.path("a.safetensors"), {{"x", Filled({2}, DType::kU8, 0)}}).ok());
  ASSERT_TRUE(WriteSafetensors(dir.path("b.safetensors"), {{"x", Filled({2}, DType::kU8, 1)}}).ok());
  auto c = SafetensorsCheckpoint::OpenFiles({dir.path("a.safetensors"), dir.path("b.safetensors")});
  EXPECT_THAT(std::string(c.status().message()),
              AllOf(HasSubstr("'x'"), HasSubstr("a.safetensors"), HasSubstr("b.safetensors")));
}

TEST(SafetensorsCheckpointErrors, CorruptShardNamesItsFile) {
  TestDir dir;
  auto paths = WriteShardedSafetensors(dir.path("c"), Sample(), 64);
  ASSERT_TRUE(paths.ok());
  fs::resize_file((*paths)[1], fs::file_size((*paths)[1]) - 1);  // truncate one shard's data
  const std::string m(SafetensorsCheckpoint::Open(dir.path("c")).status().message());
  EXPECT_THAT(m, HasSubstr(fs::path((*paths)[1]).filename().string()));
}

}  // namespace
}  // namespace sparkserve::quant
