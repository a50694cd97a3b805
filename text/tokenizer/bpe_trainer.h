// BpeTrainer: learns byte-level BPE merges from a text, as a small tokenizer.json's model section
// (the demo model's tokenizer is trained with it). Deterministic: ties go to the smallest pair.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sparkserve::text {

struct TrainedBpe {
  // Byte-level vocabulary strings in id order: the 256 byte symbols (id = byte), then one entry
  // per merge that made a new symbol.
  std::vector<std::string> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
};

// Learns up to `max_merges` merges from `corpus` (stopping when no pair occurs twice). Words are cut
// by a simplified Qwen2 pre-tokenizer (" word", single digits, " punct+", spaces, newlines): merges
// learnt across slightly different boundaries than the real split regex's are still valid merges.
TrainedBpe TrainByteLevelBpe(std::string_view corpus, int max_merges);

}  // namespace sparkserve::text
