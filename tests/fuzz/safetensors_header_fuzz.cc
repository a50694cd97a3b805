// libFuzzer target for the safetensors header parser: any byte string must give either a header
// that satisfies the invariants below or an error status, never a crash, leak or sanitizer report.
// Build: cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DSPARKSERVE_CUDA=OFF -DSPARKSERVE_FUZZ=ON
//        ninja -C build-fuzz safetensors_header_fuzz
// Run:   build-fuzz/bin/safetensors_header_fuzz -dict=tests/fuzz/safetensors_header.dict \
//          -max_total_time=300 NEW_DIR tests/fuzz/corpus/safetensors_header
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "quant/safetensors_reader.h"
#include "tests/fuzz/safetensors_header_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto header = sparkserve::quant::ParseSafetensorsHeader({data, size}, "fuzz.safetensors");
  if (header.ok()) {
    const std::string problem = sparkserve::quant::CheckHeaderInvariants(*header, size);
    if (!problem.empty()) {
      std::fprintf(stderr, "accepted an inconsistent header: %s\n", problem.c_str());
      std::abort();
    }
  } else if (header.status().message().empty()) {
    std::abort();  // every error must say what is wrong
  }
  return 0;
}
