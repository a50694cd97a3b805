// StepPlan <-> StepPlanMsg (see step_plan_codec.h).
#include "proto/step_plan_codec.h"

#include <cstring>
#include <limits>
#include <vector>

#include "fmt/format.h"
#include "proto/step_plan.pb.h"

namespace sparkserve::proto {
namespace {

using google::protobuf::RepeatedField;

template <typename T>
void PutIds(const std::vector<int32_t>& ids, RepeatedField<T>* out) {
  out->Reserve(static_cast<int>(ids.size()));
  for (int32_t v : ids) out->AddAlreadyReserved(static_cast<T>(static_cast<uint32_t>(v)));
}

// Non-negative int32 ids from the wire (anything past int32 is refused).
absl::Status GetIds(const RepeatedField<uint32_t>& in, const char* what, std::vector<int32_t>* out) {
  out->reserve(static_cast<size_t>(in.size()));
  for (uint32_t v : in) {
    if (v > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      return absl::InvalidArgumentError(fmt::format("step plan: {} value {} is past int32", what, v));
    }
    out->push_back(static_cast<int32_t>(v));
  }
  return absl::OkStatus();
}

LogitsKind ToWire(model::LogitsWanted w) {
  switch (w) {
    case model::LogitsWanted::kNone: return LOGITS_NONE;
    case model::LogitsWanted::kLast: return LOGITS_LAST;
    case model::LogitsWanted::kAll: return LOGITS_ALL;
  }
  return LOGITS_NONE;
}

absl::StatusOr<model::LogitsWanted> FromWire(int w) {
  switch (w) {
    case LOGITS_NONE: return model::LogitsWanted::kNone;
    case LOGITS_LAST: return model::LogitsWanted::kLast;
    case LOGITS_ALL: return model::LogitsWanted::kAll;
    default: return absl::InvalidArgumentError(fmt::format("step plan: unknown logits kind {}", w));
  }
}

bool SameFloat(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool SameDouble(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool SameRow(const model::RowSampling& a, const model::RowSampling& b) {
  if (a.bias.size() != b.bias.size()) return false;
  for (size_t i = 0; i < a.bias.size(); ++i) {
    if (a.bias[i].first != b.bias[i].first || !SameFloat(a.bias[i].second, b.bias[i].second)) return false;
  }
  return SameFloat(a.temperature, b.temperature) && a.top_k == b.top_k && SameFloat(a.top_p, b.top_p) &&
         SameFloat(a.min_p, b.min_p) && SameFloat(a.repetition_penalty, b.repetition_penalty) &&
         SameFloat(a.frequency_penalty, b.frequency_penalty) && SameFloat(a.presence_penalty, b.presence_penalty) &&
         a.num_logprobs == b.num_logprobs && SameDouble(a.uniform, b.uniform) && a.banned == b.banned &&
         a.mask_row == b.mask_row &&
         a.history_ids == b.history_ids && a.history_output_counts == b.history_output_counts;
}

}  // namespace

std::string EncodeStepPlan(const model::StepPlan& plan) {
  StepPlanMsg msg;
  for (const model::SlotCopy& c : plan.copies) {
    SlotCopyMsg* m = msg.add_copies();
    m->set_src(c.src);
    m->set_dst(c.dst);
  }
  for (const model::PageCopy& c : plan.page_copies) {
    SlotCopyMsg* m = msg.add_page_copies();
    m->set_src(c.src);
    m->set_dst(c.dst);
  }
  for (const model::ColumnCommit& c : plan.commits) {
    ColumnCommitMsg* m = msg.add_commits();
    m->set_slot(c.slot);
    m->set_accepted(c.accepted);
  }
  for (const model::DraftWork& d : plan.drafts) {
    DraftWorkMsg* m = msg.add_drafts();
    m->set_slot(d.slot);
    m->set_start_pos(d.start_pos);
    PutIds(d.tokens, m->mutable_tokens());
    m->set_hidden_row(d.hidden_row);
    m->set_num_drafts(d.num_drafts);
    PutIds(d.kv_pages, m->mutable_kv_pages());
    m->set_logits(ToWire(d.logits));
  }
  for (const model::SeqWork& s : plan.seqs) {
    SeqWorkMsg* m = msg.add_seqs();
    m->set_slot(s.slot);
    m->set_start_pos(s.start_pos);
    PutIds(s.tokens, m->mutable_tokens());
    m->set_num_drafts(s.num_drafts);
    PutIds(s.kv_pages, m->mutable_kv_pages());
    m->set_logits(ToWire(s.logits));
    m->set_keep_column_states(s.keep_column_states);
  }
  for (const model::RowSampling& r : plan.sampling) {
    RowSamplingMsg* m = msg.add_sampling();
    m->set_temperature(r.temperature);
    m->set_top_k(r.top_k);
    m->set_top_p(r.top_p);
    m->set_min_p(r.min_p);
    m->set_repetition_penalty(r.repetition_penalty);
    m->set_frequency_penalty(r.frequency_penalty);
    m->set_presence_penalty(r.presence_penalty);
    m->set_num_logprobs(r.num_logprobs);
    m->set_uniform(r.uniform);
    PutIds(r.banned, m->mutable_banned());
    for (const auto& [id, value] : r.bias) {
      m->add_bias_ids(static_cast<uint32_t>(id));
      m->add_bias_values(value);
    }
    PutIds(r.history_ids, m->mutable_history_ids());
    PutIds(r.history_output_counts, m->mutable_history_output_counts());
    m->set_mask_row_plus_one(static_cast<uint32_t>(r.mask_row + 1));
  }
  plan.masks.WaitReady();  // filled on the engine's mask thread while the step was being prepared
  if (plan.masks.words_per_row > 0) {
    TokenMasksMsg* m = msg.mutable_masks();
    m->set_words_per_row(plan.masks.words_per_row);
    m->mutable_words()->Add(plan.masks.words.begin(), plan.masks.words.end());
  }
  return msg.SerializeAsString();
}

absl::StatusOr<model::StepPlan> DecodeStepPlan(std::string_view bytes) {
  StepPlanMsg msg;
  if (!msg.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(fmt::format("step plan: {} bytes are not a StepPlanMsg", bytes.size()));
  }
  model::StepPlan plan;
  for (const SlotCopyMsg& m : msg.copies()) plan.copies.push_back({m.src(), m.dst()});
  for (const SlotCopyMsg& m : msg.page_copies()) plan.page_copies.push_back({m.src(), m.dst()});
  for (const ColumnCommitMsg& m : msg.commits()) plan.commits.push_back({m.slot(), m.accepted()});
  for (const DraftWorkMsg& m : msg.drafts()) {
    model::DraftWork& d = plan.drafts.emplace_back();
    d.slot = m.slot();
    d.start_pos = m.start_pos();
    if (auto s = GetIds(m.tokens(), "draft token", &d.tokens); !s.ok()) return s;
    d.hidden_row = m.hidden_row();
    d.num_drafts = m.num_drafts();
    if (auto s = GetIds(m.kv_pages(), "draft KV page", &d.kv_pages); !s.ok()) return s;
    auto logits = FromWire(m.logits());
    if (!logits.ok()) return logits.status();
    d.logits = *logits;
  }
  for (const SeqWorkMsg& m : msg.seqs()) {
    model::SeqWork& s = plan.seqs.emplace_back();
    s.slot = m.slot();
    s.start_pos = m.start_pos();
    if (auto st = GetIds(m.tokens(), "token", &s.tokens); !st.ok()) return st;
    s.num_drafts = m.num_drafts();
    if (auto st = GetIds(m.kv_pages(), "KV page", &s.kv_pages); !st.ok()) return st;
    auto logits = FromWire(m.logits());
    if (!logits.ok()) return logits.status();
    s.logits = *logits;
    s.keep_column_states = m.keep_column_states();
  }
  for (const RowSamplingMsg& m : msg.sampling()) {
    model::RowSampling& r = plan.sampling.emplace_back();
    r.temperature = m.temperature();
    r.top_k = m.top_k();
    r.top_p = m.top_p();
    r.min_p = m.min_p();
    r.repetition_penalty = m.repetition_penalty();
    r.frequency_penalty = m.frequency_penalty();
    r.presence_penalty = m.presence_penalty();
    r.num_logprobs = m.num_logprobs();
    r.uniform = m.uniform();
    if (auto s = GetIds(m.banned(), "banned id", &r.banned); !s.ok()) return s;
    if (m.bias_ids_size() != m.bias_values_size()) {
      return absl::InvalidArgumentError(fmt::format("step plan: {} logit_bias ids but {} values", m.bias_ids_size(),
                                                    m.bias_values_size()));
    }
    std::vector<int32_t> bias_ids;
    if (auto s = GetIds(m.bias_ids(), "logit_bias id", &bias_ids); !s.ok()) return s;
    for (size_t i = 0; i < bias_ids.size(); ++i) r.bias.emplace_back(bias_ids[i], m.bias_values(static_cast<int>(i)));
    if (auto s = GetIds(m.history_ids(), "history id", &r.history_ids); !s.ok()) return s;
    if (auto s = GetIds(m.history_output_counts(), "history count", &r.history_output_counts); !s.ok()) return s;
    if (m.mask_row_plus_one() > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      return absl::InvalidArgumentError(fmt::format("step plan: mask row {} is past int32", m.mask_row_plus_one()));
    }
    r.mask_row = static_cast<int32_t>(m.mask_row_plus_one()) - 1;
  }
  if (msg.has_masks()) {
    const TokenMasksMsg& m = msg.masks();
    if (m.words_per_row() < 0 || (m.words_per_row() == 0 && m.words_size() > 0) ||
        (m.words_per_row() > 0 && m.words_size() % m.words_per_row() != 0)) {
      return absl::InvalidArgumentError(fmt::format("step plan: {} token mask words do not make rows of {}",
                                                    m.words_size(), m.words_per_row()));
    }
    plan.masks.words_per_row = m.words_per_row();
    plan.masks.words.assign(m.words().begin(), m.words().end());
  }
  return plan;
}

bool SameStepPlan(const model::StepPlan& a, const model::StepPlan& b) {
  if (a.copies.size() != b.copies.size() || a.commits.size() != b.commits.size() ||
      a.drafts.size() != b.drafts.size() || a.seqs.size() != b.seqs.size() || a.sampling.size() != b.sampling.size()) {
    return false;
  }
  for (size_t i = 0; i < a.copies.size(); ++i) {
    if (a.copies[i].src != b.copies[i].src || a.copies[i].dst != b.copies[i].dst) return false;
  }
  if (a.page_copies.size() != b.page_copies.size()) return false;
  for (size_t i = 0; i < a.page_copies.size(); ++i) {
    if (a.page_copies[i].src != b.page_copies[i].src || a.page_copies[i].dst != b.page_copies[i].dst) return false;
  }
  for (size_t i = 0; i < a.commits.size(); ++i) {
    if (a.commits[i].slot != b.commits[i].slot || a.commits[i].accepted != b.commits[i].accepted) return false;
  }
  for (size_t i = 0; i < a.drafts.size(); ++i) {
    const model::DraftWork &x = a.drafts[i], &y = b.drafts[i];
    if (x.slot != y.slot || x.start_pos != y.start_pos || x.tokens != y.tokens || x.hidden_row != y.hidden_row ||
        x.num_drafts != y.num_drafts || x.kv_pages != y.kv_pages || x.logits != y.logits) {
      return false;
    }
  }
  for (size_t i = 0; i < a.seqs.size(); ++i) {
    const model::SeqWork &x = a.seqs[i], &y = b.seqs[i];
    if (x.slot != y.slot || x.start_pos != y.start_pos || x.tokens != y.tokens || x.num_drafts != y.num_drafts ||
        x.kv_pages != y.kv_pages || x.logits != y.logits || x.keep_column_states != y.keep_column_states) {
      return false;
    }
  }
  for (size_t i = 0; i < a.sampling.size(); ++i) {
    if (!SameRow(a.sampling[i], b.sampling[i])) return false;
  }
  return a.masks.words_per_row == b.masks.words_per_row && a.masks.words == b.masks.words;
}

}  // namespace sparkserve::proto
