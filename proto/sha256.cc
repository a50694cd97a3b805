// SHA-256 over OpenSSL's EVP interface (see sha256.h).
#include "proto/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace sparkserve::proto {

struct Sha256Hasher::State {
  EVP_MD_CTX* ctx = nullptr;
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256Hasher::Sha256Hasher() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("EVP_DigestInit_ex(sha256) failed");
  }
}

Sha256Hasher::~Sha256Hasher() = default;

void Sha256Hasher::Update(std::span<const uint8_t> data) {
  if (!data.empty()) EVP_DigestUpdate(state_->ctx, data.data(), data.size());
}

void Sha256Hasher::Update(std::string_view data) {
  Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

std::string Sha256Hasher::Final() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(state_->ctx, out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string Sha256(std::span<const uint8_t> data) {
  Sha256Hasher h;
  h.Update(data);
  return h.Final();
}

std::string Sha256(std::string_view data) {
  Sha256Hasher h;
  h.Update(data);
  return h.Final();
}

std::string HexOf(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace sparkserve::proto
