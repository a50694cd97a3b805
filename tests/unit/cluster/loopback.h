// Loopback helpers for control-plane tests: free ports and a listener that never answers.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace sparkserve::engine::testing {

// A TCP socket bound to 127.0.0.1:<free port>; listening when `listen_too` (then the kernel
// completes handshakes but nobody ever reads: a peer that hangs).
class LoopbackSocket {
 public:
  explicit LoopbackSocket(bool listen_too) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) throw std::runtime_error("bind");
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (listen_too && listen(fd_, 16) != 0) throw std::runtime_error("listen");
  }
  ~LoopbackSocket() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A loopback port nothing listens on (bound, then released: connections are refused).
inline int UnusedLoopbackPort() {
  LoopbackSocket s(/*listen_too=*/false);
  return s.port();
}

}  // namespace sparkserve::engine::testing
