// Address resolution for the data plane (see net_address.h).
#include "engine/cluster/net_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

#include "fmt/format.h"

namespace sparkserve::engine::cluster {
namespace {

std::string NumericHost(const sockaddr* sa, socklen_t len) {
  char buf[NI_MAXHOST] = {};
  if (getnameinfo(sa, len, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return buf;
}

}  // namespace

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& target) {
  std::string host;
  std::string port;
  if (!target.empty() && target.front() == '[') {
    const size_t close = target.find(']');
    if (close == std::string::npos || close + 1 >= target.size() || target[close + 1] != ':') {
      return absl::InvalidArgumentError(fmt::format("'{}' is not host:port ([v6]:port for IPv6)", target));
    }
    host = target.substr(1, close - 1);
    port = target.substr(close + 2);
  } else {
    const size_t colon = target.rfind(':');
    if (colon == std::string::npos || target.find(':') != colon) {
      return absl::InvalidArgumentError(fmt::format("'{}' is not host:port ([v6]:port for IPv6)", target));
    }
    host = target.substr(0, colon);
    port = target.substr(colon + 1);
  }
  int p = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (host.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
    return absl::InvalidArgumentError(fmt::format("'{}' is not host:port with a port in 1..65535", target));
  }
  return std::make_pair(host, p);
}

absl::StatusOr<std::string> ResolveHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    return absl::NotFoundError(fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc)));
  }
  std::string v4, v6;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    std::string s = NumericHost(a->ai_addr, a->ai_addrlen);
    if (a->ai_family == AF_INET && v4.empty()) v4 = s;
    if (a->ai_family == AF_INET6 && v6.empty()) v6 = s;
  }
  freeaddrinfo(res);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  return absl::NotFoundError(fmt::format("'{}' resolves to no IP address", host));
}

absl::StatusOr<std::string> LocalAddressFacing(const std::string& peer) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(peer.c_str(), "9", &hints, &res); rc != 0) {
    return absl::InvalidArgumentError(fmt::format("'{}' is not a numeric address: {}", peer, gai_strerror(rc)));
  }
  const int fd = socket(res->ai_family, SOCK_DGRAM, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    return absl::InternalError(fmt::format("socket: {}", std::strerror(errno)));
  }
  const int rc = connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(fmt::format("no route to {}: {}", peer, std::strerror(err)));
  }
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
  close(fd);
  std::string s = NumericHost(reinterpret_cast<sockaddr*>(&local), len);
  if (s.empty()) return absl::InternalError(fmt::format("no local address towards {}", peer));
  return s;
}

}  // namespace sparkserve::engine::cluster
