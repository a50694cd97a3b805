// ValidateStepPlan: every backend's shared refusal of bad steps, one case per rule, each named in
// the message (the CUDA runner relies on these checks: its kernels trust page tables and ids).
#include "model/step_validation.h"

#include <gtest/gtest.h>

#include <string>

namespace sparkserve::model {
namespace {

StepLimits Limits() {
  StepLimits l;
  l.num_slots = 4;
  l.max_seq_len = 64;
  l.kv_page_size = 16;
  l.num_kv_pages = 8;
  l.needs_kv = true;
  l.max_verify_tokens = 4;
  l.vocab_size = 100;
  l.max_step_tokens = 10;
  return l;
}

SeqWork Seq(SlotId slot, int32_t start, std::vector<int32_t> tokens, std::vector<int32_t> pages) {
  SeqWork w;
  w.slot = slot;
  w.start_pos = start;
  w.tokens = std::move(tokens);
  w.kv_pages = std::move(pages);
  return w;
}

std::string Error(const StepPlan& p) {
  const absl::Status s = ValidateStepPlan(Limits(), p);
  return s.ok() ? "" : std::string(s.message());
}

TEST(StepValidation, AcceptsAValidRaggedStep) {
  StepPlan p;
  p.seqs = {Seq(0, 0, {1, 2, 3}, {0}), Seq(3, 20, {4}, {1, 2})};
  EXPECT_EQ(Error(p), "");
}

TEST(StepValidation, NamesEachRuleItRefuses) {
  auto refused = [](std::vector<SeqWork> seqs, const std::string& needle) {
    StepPlan p;
    p.seqs = std::move(seqs);
    const std::string e = Error(p);
    EXPECT_NE(e.find(needle), std::string::npos) << "'" << e << "' lacks '" << needle << "'";
  };
  refused({Seq(4, 0, {1}, {0})}, "slot 4 outside [0, 4)");
  refused({Seq(0, 0, {}, {0})}, "no tokens");
  refused({Seq(0, 60, {1, 2, 3, 4, 5}, {0, 1, 2, 3, 4})}, "outside the context of 64");
  refused({Seq(0, 16, {1}, {0})}, "do not cover 17 positions");
  refused({Seq(0, 0, {1}, {0}), Seq(0, 1, {2}, {1})}, "appears twice");
  refused({Seq(0, 0, {1, 100}, {0})}, "token id 100 outside the vocabulary");
  refused({Seq(0, 0, {-1}, {0})}, "token id -1");
  refused({Seq(0, 0, {1}, {8})}, "KV page 8 outside the pool");
  SeqWork verify = Seq(0, 0, {1, 2, 3, 4, 5}, {0});
  verify.keep_column_states = true;
  refused({verify}, "exceeds max_verify_tokens 4");
  refused({Seq(0, 0, {1, 2, 3, 4, 5, 6}, {0}), Seq(1, 0, {1, 2, 3, 4, 5}, {1})}, "11 tokens exceeds");
}

TEST(StepValidation, PagesAreNotNeededWithoutAttention) {
  StepLimits l = Limits();
  l.needs_kv = false;
  StepPlan p;
  p.seqs = {Seq(0, 0, {1, 2}, {})};
  EXPECT_TRUE(ValidateStepPlan(l, p).ok());
}

}  // namespace
}  // namespace sparkserve::model
