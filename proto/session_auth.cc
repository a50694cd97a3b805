// Nonces and HMAC proofs of the session handshake (see session_auth.h).
#include "proto/session_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

#include "fmt/format.h"

namespace sparkserve::proto {
namespace {

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    throw std::runtime_error("RAND_bytes failed: the system has no entropy source");
  }
  return out;
}

std::string Proof(std::string_view label, std::string_view token, std::string_view first, std::string_view second) {
  std::string message;
  message.reserve(label.size() + first.size() + second.size());
  message.append(label).append(first).append(second);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

}  // namespace

std::string NewNonce() { return RandomBytes(kNonceBytes); }

std::string NewRandomId() {
  const std::string raw = RandomBytes(16);
  std::string hex;
  for (unsigned char c : raw) hex += fmt::format("{:02x}", c);
  return hex;
}

std::string HeadProof(std::string_view token, std::string_view head_nonce, std::string_view node_nonce) {
  return Proof("sparkserve-head", token, head_nonce, node_nonce);
}

std::string NodeProof(std::string_view token, std::string_view node_nonce, std::string_view head_nonce) {
  return Proof("sparkserve-node", token, node_nonce, head_nonce);
}

bool ProofsEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace sparkserve::proto
