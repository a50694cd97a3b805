// Test doubles for the HTTP layer: a byte-level TextCodec with a few special tokens and a toy chat
// template, and an EngineApi that replays given token ids (on its own thread, like the engine).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine_api.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http::testing {

// Ids 0..255 are bytes; 256.. are the tokens below (256 "<|im_end|>" is special).
class FakeCodec : public TextCodec {
 public:
  static constexpr int32_t kImEnd = 256;
  static constexpr int32_t kThink = 257;
  static constexpr int32_t kEndThink = 258;
  static constexpr int32_t kToolCall = 259;
  static constexpr int32_t kEndToolCall = 260;
  const std::vector<std::string> kAdded = {"<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"};

  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text, bool) const override {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < text.size();) {
      bool matched = false;
      for (size_t k = 0; k < kAdded.size(); ++k) {
        if (text.compare(i, kAdded[k].size(), kAdded[k]) == 0) {
          ids.push_back(256 + static_cast<int32_t>(k));
          i += kAdded[k].size();
          matched = true;
          break;
        }
      }
      if (!matched) ids.push_back(static_cast<unsigned char>(text[i++]));
    }
    return ids;
  }
  std::string Piece(int32_t id, bool skip_special) const {
    if (id < 256) return std::string(1, static_cast<char>(id));
    if (id == kImEnd && skip_special) return "";
    return kAdded.at(static_cast<size_t>(id - 256));
  }
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids) s += Piece(id, skip_special);
    return s;
  }
  class Decoder : public IncrementalTextDecoder {
   public:
    Decoder(const FakeCodec& c, bool skip) : c_(c), skip_(skip) {}
    std::string Push(std::span<const int32_t> ids) override {
      for (int32_t id : ids) pending_ += c_.Piece(id, skip_);
      // Release up to the last complete UTF-8 character.
      size_t cut = pending_.size();
      for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
        unsigned char b = static_cast<unsigned char>(pending_[pending_.size() - back]);
        if ((b & 0xC0) == 0x80) continue;
        size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
        if (need > back) cut = pending_.size() - back;
        break;
      }
      std::string out = pending_.substr(0, cut);
      pending_.erase(0, cut);
      return out;
    }
    std::string Flush() override {
      if (pending_.empty()) return "";
      pending_.clear();
      return "\xEF\xBF\xBD";
    }
   private:
    const FakeCodec& c_;
    bool skip_;
    std::string pending_;
  };
  std::unique_ptr<IncrementalTextDecoder> NewDecoder(bool skip) const override {
    return std::make_unique<Decoder>(*this, skip);
  }
  std::string TokenString(int32_t id) const override { return Piece(id, false); }
  int32_t vocab_size() const override { return 256 + static_cast<int32_t>(kAdded.size()); }

  // <|im_start|>ROLE\nCONTENT<|im_end|>\n per message; tools as one system line; the generation
  // prompt opens <think> when enable_thinking is true.
  absl::StatusOr<std::string> RenderChat(const Json& messages, const Json& tools, bool add_generation_prompt,
                                         bool, const Json& kwargs) const override {
    for (const auto& m : messages) {
      if (m["role"] == "user" && m["content"] == "BLOCK") WaitUnblocked();
    }
    std::lock_guard<std::mutex> lock(mu_);
    last_messages = messages;
    last_tools = tools;
    last_kwargs = kwargs;
    std::string out;
    if (!tools.is_null()) out += "<|im_start|>system\ntools: " + tools.dump() + "<|im_end|>\n";
    for (const auto& m : messages) {
      if (m["role"] == "user" && m["content"] == "RAISE") return absl::InvalidArgumentError("template says no");
      out += "<|im_start|>" + m["role"].get<std::string>() + "\n";
      if (m.contains("reasoning_content")) out += "<think>" + m["reasoning_content"].get<std::string>() + "</think>";
      if (m.contains("content") && m["content"].is_string()) out += m["content"].get<std::string>();
      if (m.contains("tool_calls")) out += m["tool_calls"].dump();
      out += "<|im_end|>\n";
    }
    if (add_generation_prompt) {
      out += "<|im_start|>assistant\n";
      if (kwargs.value("enable_thinking", false)) out += "<think>\n";
    }
    return out;
  }
  // Renders of a "BLOCK" user message wait until Unblock() (a slow template, for the I/O-thread tests).
  void Unblock() {
    std::lock_guard<std::mutex> lock(block_mu_);
    unblocked_ = true;
    block_cv_.notify_all();
  }
  int blocked_renders() const { return blocked_.load(); }

  mutable std::mutex mu_;
  mutable Json last_messages, last_tools, last_kwargs;

 private:
  void WaitUnblocked() const {
    ++blocked_;
    std::unique_lock<std::mutex> lock(block_mu_);
    block_cv_.wait(lock, [this] { return unblocked_; });
  }
  mutable std::mutex block_mu_;
  mutable std::condition_variable block_cv_;
  mutable std::atomic<int> blocked_{0};
  bool unblocked_ = false;
};

// Replays `outputs[i]` (text, encoded with FakeCodec; per prompt when set so) as sample i's tokens,
// one id per event, each `delay` apart, ending with `finish` (or kLength at max_tokens). Cancel ends
// with kAbort.
class FakeEngine : public engine::EngineApi {
 public:
  explicit FakeEngine(const FakeCodec* codec) : codec_(codec) {}
  ~FakeEngine() override { JoinAll(); }
  // Waits for every replay thread (their sinks post into the server's io_context).
  void JoinAll() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }
  void SetOutputs(std::vector<std::string> outputs, scheduler::FinishReason finish = scheduler::FinishReason::kStop) {
    std::lock_guard<std::mutex> lock(mu_);
    outputs_.clear();
    for (auto& o : outputs) outputs_.push_back(*codec_->Encode(o, false));
    finish_ = finish;
  }
  // A request whose prompt is `prompt` (text, encoded) replays these instead (batch completions).
  void SetOutputsForPrompt(const std::string& prompt, std::vector<std::string> outputs) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& o = outputs_by_prompt_[*codec_->Encode(prompt, false)];
    o.clear();
    for (auto& text : outputs) o.push_back(*codec_->Encode(text, false));
  }
  void SetOutputIds(std::vector<std::vector<int32_t>> ids, scheduler::FinishReason finish) {
    std::lock_guard<std::mutex> lock(mu_);
    outputs_ = std::move(ids);
    finish_ = finish;
  }
  void SetDelay(std::chrono::milliseconds d) { delay_ = d; }
  void SetSubmitError(absl::Status s) { submit_error_ = std::move(s); }
  void SetError(std::string e) { error_ = std::move(e); }

  absl::StatusOr<scheduler::RequestId> Submit(scheduler::Request request, engine::TokenSink sink) override {
    if (!submit_error_.ok()) return submit_error_;
    std::lock_guard<std::mutex> lock(mu_);
    scheduler::RequestId id = ++next_id_;
    request.id = id;
    submitted.push_back(request);
    auto cancelled = std::make_shared<std::atomic<bool>>(false);
    cancel_flags_[id] = cancelled;
    ++running_;
    auto by_prompt = outputs_by_prompt_.find(request.prompt_ids);
    auto outputs = by_prompt != outputs_by_prompt_.end() ? by_prompt->second : outputs_;
    auto finish = finish_;
    auto error = error_;
    threads_.emplace_back([this, request, sink, cancelled, outputs, finish, error] {
      int n = std::max(1, request.n);
      std::vector<size_t> pos(n, 0);
      std::vector<bool> done(n, false);
      int remaining = n;
      while (remaining > 0) {
        std::this_thread::sleep_for(delay_);
        for (int i = 0; i < n; ++i) {
          if (done[i]) continue;
          scheduler::TokenEvent ev;
          ev.index = i;
          if (cancelled->load()) {
            ev.finish = scheduler::FinishReason::kAbort;
          } else if (!error.empty()) {
            ev.finish = scheduler::FinishReason::kError;
            ev.error = error;
          } else {
            const auto& out = outputs.at(std::min<size_t>(i, outputs.size() - 1));
            if (pos[i] < out.size()) {
              int32_t id = out[pos[i]++];
              ev.ids.push_back(id);
              if (request.sampling.logprobs >= 0) {
                ev.logprobs.push_back({id, -0.25f * static_cast<float>(pos[i])});
                std::vector<scheduler::TokenLogprob> top;
                for (int k = 0; k < request.sampling.logprobs; ++k) top.push_back({id + k, -0.25f * (k + 1)});
                ev.top_logprobs.push_back(top);
              }
            }
            if (static_cast<int32_t>(pos[i]) >= request.max_tokens) {
              ev.finish = scheduler::FinishReason::kLength;
            } else if (pos[i] >= out.size()) {
              ev.finish = finish;
            }
          }
          if (ev.finish != scheduler::FinishReason::kNone) {
            done[i] = true;
            --remaining;
          }
          sink(ev);
        }
      }
      --running_;
    });
    return id;
  }
  void Cancel(scheduler::RequestId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++cancels;
    if (auto it = cancel_flags_.find(id); it != cancel_flags_.end()) it->second->store(true);
  }
  // Ends every running request as Engine::Shutdown does (final events kAbort, not asked for by
  // the HTTP side).
  void AbortAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, flag] : cancel_flags_) flag->store(true);
  }
  engine::EngineStats Stats() const override {
    engine::EngineStats s;
    s.num_requests_running = running_.load();
    s.steps_total = 7;
    s.total_kv_pages = 100;
    s.free_kv_pages = 75;
    s.requests_finished_stop = 5;
    s.time_to_first_token_s = engine::Histogram::WithBounds({0.5, 1.0});
    s.time_to_first_token_s.Observe(0.7);
    return s;
  }
  int running() const { return running_.load(); }

  std::vector<scheduler::Request> submitted;
  std::atomic<int> cancels{0};

 private:
  const FakeCodec* codec_;
  std::mutex mu_;
  std::vector<std::vector<int32_t>> outputs_ = {{}};
  std::map<std::vector<int32_t>, std::vector<std::vector<int32_t>>> outputs_by_prompt_;
  scheduler::FinishReason finish_ = scheduler::FinishReason::kStop;
  std::chrono::milliseconds delay_{0};
  absl::Status submit_error_;
  std::string error_;
  scheduler::RequestId next_id_ = 0;
  std::map<scheduler::RequestId, std::shared_ptr<std::atomic<bool>>> cancel_flags_;
  std::atomic<int> running_{0};
  std::vector<std::thread> threads_;
};

}  // namespace sparkserve::head::http::testing
