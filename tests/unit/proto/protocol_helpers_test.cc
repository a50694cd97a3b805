// The control plane's helpers against outside oracles: SHA-256 and HMAC-SHA256 on published test
// vectors (FIPS 180-2; HMAC as Python's hmac computes it), the proofs' binding to both nonces, and the lockstep check: equal
// digests pass, one rank's different digest stops every rank with an error naming the step.
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/lockstep.h"
#include "proto/session_auth.h"
#include "proto/sha256.h"
#include "proto/shard_wire.h"

namespace sparkserve::proto {
namespace {

using ::testing::HasSubstr;

TEST(Sha256, MatchesFips180Vectors) {
  EXPECT_EQ(HexOf(Sha256(std::string_view("abc"))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HexOf(Sha256(std::string_view(""))), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256Hasher h;  // the same in pieces
  h.Update(std::string_view("ab"));
  h.Update(std::string_view("c"));
  EXPECT_EQ(HexOf(h.Final()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(SessionAuth, ProofsBindTheTokenBothNoncesAndTheDirection) {
  const std::string a = NewNonce(), b = NewNonce();
  EXPECT_EQ(a.size(), kNonceBytes);
  EXPECT_NE(a, b);
  EXPECT_EQ(HeadProof("tok", a, b), HeadProof("tok", a, b));
  EXPECT_NE(HeadProof("tok", a, b), HeadProof("tok", b, a));
  EXPECT_NE(HeadProof("tok", a, b), HeadProof("tok2", a, b));
  EXPECT_NE(HeadProof("tok", a, b), NodeProof("tok", b, a));  // the labels keep the two directions apart
  EXPECT_EQ(HeadProof("tok", a, b).size(), 32u);
  EXPECT_TRUE(ProofsEqual(HeadProof("tok", a, b), HeadProof("tok", a, b)));
  EXPECT_FALSE(ProofsEqual(HeadProof("tok", a, b), HeadProof("tok", a, b).substr(1)));
  EXPECT_EQ(NewRandomId().size(), 32u);
}

TEST(SessionAuth, HmacSha256IsTheStandardOne) {
  // Python's hmac module (an implementation we did not write), RFC 4231 test case 2's key and data
  // behind our label: hmac.new(b"Jefe", b"sparkserve-head" + b"what do ya want " + b"for nothing?",
  // hashlib.sha256).hexdigest(); the same module gives RFC 4231's own value for the bare data.
  EXPECT_EQ(HexOf(HeadProof("Jefe", "what do ya want ", "for nothing?")),
            "06e0762aaf292019a7e9a270b8fa995ed0a939e87ec7e8f37a9a6c019487bf0d");
}

TEST(Lockstep, EqualDigestsPassAndOneDifferentStopsEveryRank) {
  for (bool diverge : {false, true}) {
    core::InProcessGroup group(3);
    std::vector<absl::Status> results(3);
    std::vector<std::thread> threads;
    for (int32_t r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        const uint64_t digest = (diverge && r == 2) ? 0xdeadbeefcafef00dull : 0x0123456789abcdefull;
        results[r] = CheckLockstep(group.rank(r), 7, digest);
      });
    }
    for (auto& t : threads) t.join();
    for (int32_t r = 0; r < 3; ++r) {
      if (!diverge) {
        EXPECT_TRUE(results[r].ok()) << results[r];
        continue;
      }
      EXPECT_EQ(results[r].code(), absl::StatusCode::kAborted) << r;
      EXPECT_THAT(std::string(results[r].message()),
                  ::testing::AllOf(HasSubstr("step 7"), HasSubstr("rank 2: deadbeefcafef00d"),
                                   HasSubstr("rank 0: 0123456789abcdef")));
    }
  }
}

TEST(Lockstep, DigestCoversThePlanTheIndexAndTheOutput) {
  model::StepOutput out;
  out.logits = core::Tensor::Zeros({2, 40}, core::DType::kF32);
  out.logit_row_begin = {0, 2};
  const uint64_t d = StepDigest(3, "plan", out);
  EXPECT_EQ(d, StepDigest(3, "plan", out));
  EXPECT_NE(d, StepDigest(4, "plan", out));
  EXPECT_NE(d, StepDigest(3, "plan2", out));
  model::StepOutput other = out;
  other.logits = core::Tensor::Zeros({2, 40}, core::DType::kF32);
  other.logits.data<float>()[40 + (5 * 40) / 16] = 1.0f;  // one of row 1's sampled values
  EXPECT_NE(d, StepDigest(3, "plan", other));
  model::StepOutput sampled = out;
  sampled.sampled.resize(1);
  sampled.sampled[0].id = 9;
  EXPECT_NE(d, StepDigest(3, "plan", sampled));
}

TEST(ShardWire, RunnerSettingsRoundTripAndBadNamesAreRefused) {
  model::RunnerOptions o;
  o.backend = model::Backend::kCuda;
  o.max_batch = 5;
  o.max_seq_len = 99;
  o.max_step_tokens = 77;
  o.kv_dtype = model::KvCacheDtype::kFp8;
  o.state_dtype = model::StateDtype::kBf16;
  o.gpu_memory_utilization = 0.5;
  o.max_verify_tokens = 6;
  o.cuda_mtp = true;
  o.draft_vocab = 1000;
  absl::StatusOr<model::RunnerOptions> back = RunnerSettingsFromWire(RunnerSettingsToWire(o));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->backend, model::Backend::kCuda);
  EXPECT_EQ(back->max_batch, 5);
  EXPECT_EQ(back->max_seq_len, 99);
  EXPECT_EQ(back->max_step_tokens, 77);
  EXPECT_EQ(back->kv_dtype, model::KvCacheDtype::kFp8);
  EXPECT_EQ(back->state_dtype, model::StateDtype::kBf16);
  EXPECT_EQ(back->gpu_memory_utilization, 0.5);
  EXPECT_EQ(back->max_verify_tokens, 6);  // the nodes must keep the head's verify columns
  EXPECT_TRUE(back->cuda_mtp);            // and load the MTP block the head drafts with
  EXPECT_EQ(back->draft_vocab, 1000);     // drafting among the same ids
  RunnerSettings bad = RunnerSettingsToWire(o);
  bad.set_kv_dtype("fp4");
  EXPECT_THAT(std::string(RunnerSettingsFromWire(bad).status().message()), HasSubstr("kv_dtype 'fp4'"));
  for (core::DType d : {core::DType::kF32, core::DType::kBF16, core::DType::kF16, core::DType::kF8E4M3,
                        core::DType::kU8, core::DType::kI32, core::DType::kI64}) {
    EXPECT_EQ(*DTypeFromWire(DTypeToWire(d)), d);
  }
}

}  // namespace
}  // namespace sparkserve::proto
