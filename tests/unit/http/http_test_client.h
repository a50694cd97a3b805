// A blocking HTTP/1.1 client for the HTTP layer's tests (Beast, loopback only), and SSE parsing.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "head/http/json_io.h"

namespace sparkserve::head::http::testing {

struct ClientReply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  Json json() const { return Json::parse(body); }
};

class TestClient {
 public:
  explicit TestClient(uint16_t port) : socket_(ioc_) {
    boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), port);
    socket_.connect(ep);
  }
  ClientReply Send(const std::string& method, const std::string& target, const std::string& body = "",
                   const std::map<std::string, std::string>& headers = {}) {
    namespace bhttp = boost::beast::http;
    bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(method), target, 11);
    req.set(bhttp::field::host, "127.0.0.1");
    if (!body.empty()) req.set(bhttp::field::content_type, "application/json");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    bhttp::write(socket_, req);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64u << 20);
    bhttp::read(socket_, buffer_, parser);
    ClientReply r;
    r.status = static_cast<int>(parser.get().result_int());
    r.body = parser.get().body();
    for (const auto& f : parser.get()) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = std::string(f.value());
    }
    return r;
  }
  boost::asio::ip::tcp::socket& socket() { return socket_; }

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

struct SseEvent {
  std::string event;  // "" when the event had no name
  std::string data;
};

inline std::vector<SseEvent> ParseSse(const std::string& body) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string block = body.substr(pos, end - pos);
    pos = end + 2;
    if (block.empty()) continue;
    SseEvent e;
    size_t lp = 0;
    while (lp < block.size()) {
      size_t le = block.find('\n', lp);
      if (le == std::string::npos) le = block.size();
      std::string line = block.substr(lp, le - lp);
      lp = le + 1;
      if (line.rfind("event: ", 0) == 0) e.event = line.substr(7);
      if (line.rfind("data: ", 0) == 0) e.data += line.substr(6);
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace sparkserve::head::http::testing
