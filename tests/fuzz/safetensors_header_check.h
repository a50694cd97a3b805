// Invariants every header ParseSafetensorsHeader accepts must satisfy; shared by the libFuzzer
// target and the corpus replay test.
#pragma once
#include <cstddef>
#include <string>

#include "quant/safetensors_reader.h"

namespace sparkserve::quant {

// Empty when `h` (parsed from a file of `file_size` bytes) is consistent, else what is wrong.
inline std::string CheckHeaderInvariants(const SafetensorsHeader& h, size_t file_size) {
  if (h.data_start < 8 || h.data_start > file_size) return "data_start outside the file";
  if (h.data_start + h.data_size != file_size) return "data section does not end at the end of the file";
  uint64_t expected = 0;
  for (const SafetensorsEntry& e : h.tensors) {
    if (e.begin != expected) return "tensors are not contiguous from 0: " + e.name;
    uint64_t bytes = core::DTypeSize(e.dtype);
    for (int64_t d : e.shape) {
      if (d < 0) return "negative dimension: " + e.name;
      bytes *= static_cast<uint64_t>(d);
    }
    if (e.end - e.begin != bytes) return "byte count differs from shape: " + e.name;
    expected = e.end;
  }
  if (expected != h.data_size) return "tensors do not cover the data section";
  return "";
}

}  // namespace sparkserve::quant
