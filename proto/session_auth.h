// The session handshake's cryptography: nonces, and the HMAC-SHA256 proofs that bind the shared
// token to one session (each side proves it holds the token over both nonces, so the token never
// crosses the wire and a recorded proof is worthless for another session). OpenSSL's libcrypto.
#pragma once
#include <string>
#include <string_view>

namespace sparkserve::proto {

inline constexpr size_t kNonceBytes = 32;

// kNonceBytes from the system's CSPRNG.
std::string NewNonce();
// 16 random bytes as 32 hex chars: session and challenge ids.
std::string NewRandomId();

// HMAC-SHA256(token, "sparkserve-head" | head_nonce | node_nonce): what the head sends.
std::string HeadProof(std::string_view token, std::string_view head_nonce, std::string_view node_nonce);
// HMAC-SHA256(token, "sparkserve-node" | node_nonce | head_nonce): what the node answers.
std::string NodeProof(std::string_view token, std::string_view node_nonce, std::string_view head_nonce);

// a == b in time that depends only on the lengths (CRYPTO_memcmp).
bool ProofsEqual(std::string_view a, std::string_view b);

}  // namespace sparkserve::proto
