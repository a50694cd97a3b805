// Loopback tests of the control plane: NodeClient against an in-process NodeServer (127.0.0.1:0).
#include "engine/node_client.h"

#include <future>
#include <thread>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "node/node_server.h"
#include "proto/session_auth.h"
#include "tests/unit/cluster/loopback.h"

namespace sparkserve::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using std::chrono::milliseconds;

std::unique_ptr<node::NodeServer> StartNode(std::optional<std::string> token = std::nullopt,
                                            node::NodeOptions options = {}) {
  options.host = "127.0.0.1";
  if (options.port == 29500) options.port = 0;
  options.token = std::move(token);
  options.cache_dir = "/tmp/sparkserve-test-cache";
  absl::StatusOr<std::unique_ptr<node::NodeServer>> s = node::NodeServer::Start(std::move(options));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

ConnectOptions WithToken(std::string token) {
  ConnectOptions o;
  o.token = std::move(token);
  o.timeout = milliseconds(5000);
  return o;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(NodeClientTest, AcceptsAndReportsTheNode) {
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  EXPECT_GT(node->port(), 0);
  ConnectOptions o = WithToken("");
  o.tp_rank = 1;
  o.tp_world_size = 2;
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), o);
  ASSERT_TRUE(c.ok()) << c.status();
  const proto::AuthenticateResponse& h = (*c)->node();
  EXPECT_EQ(h.protocol_version(), proto::kNodeProtocolVersion);
  EXPECT_EQ(h.build_id(), kBuildId);
  EXPECT_EQ(h.session_id().size(), 32u);
  EXPECT_EQ(h.session_id().find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_FALSE(h.node_name().empty());
  EXPECT_EQ(h.cache_dir(), "/tmp/sparkserve-test-cache");
  ASSERT_GE(h.devices_size(), 1);
  EXPECT_EQ(h.devices(0).kind(), "cpu");
  EXPECT_GT(h.devices(0).total_memory_bytes(), 0u);
  EXPECT_THAT(h.capabilities().backends(), ::testing::Contains("cpu"));
  EXPECT_THAT(h.capabilities().collectives(), ::testing::Contains("gloo"));
  EXPECT_EQ(node->service().state(), proto::NODE_STATE_CONNECTED);

  absl::StatusOr<proto::HealthResponse> health = (*c)->Health();  // with the session: the details
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->state(), proto::NODE_STATE_CONNECTED);
  EXPECT_FALSE(health->head_name().empty());
  EXPECT_GE(health->uptime_seconds(), 0.0);
  EXPECT_EQ(health->build_id(), kBuildId);
}

TEST(NodeClientTest, HealthBeforeHelloSaysWaitingAndUptimeGrows) {
  auto node = StartNode(std::string("tok"));
  ASSERT_NE(node, nullptr);
  auto channel = grpc::CreateChannel(node->address(), grpc::InsecureChannelCredentials());
  auto stub = proto::NodeService::NewStub(channel);
  auto health = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
    proto::HealthResponse r;
    grpc::Status st = stub->Health(&ctx, proto::HealthRequest(), &r);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return r;
  };
  proto::HealthResponse a = health();
  EXPECT_EQ(a.state(), proto::NODE_STATE_WAITING_FOR_HEAD);
  EXPECT_TRUE(a.build_id().empty());
  std::this_thread::sleep_for(milliseconds(50));
  proto::HealthResponse b = health();
  EXPECT_GE(b.uptime_seconds() - a.uptime_seconds(), 0.04);
}

TEST(NodeClientTest, MatchingTokenIsAccepted) {
  auto node = StartNode(std::string("correct horse battery staple"));
  ASSERT_NE(node, nullptr);
  absl::StatusOr<std::unique_ptr<NodeClient>> c =
      NodeClient::Connect(node->address(), "correct horse battery staple", milliseconds(5000));
  ASSERT_TRUE(c.ok()) << c.status();
}

TEST(NodeClientTest, WrongTokenIsUnauthenticatedWithoutLeakingTokens) {
  auto node = StartNode(std::string("node-secret"));
  ASSERT_NE(node, nullptr);
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), WithToken("head-guess"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Message(c.status()), AllOf(HasSubstr(node->address()), HasSubstr("token mismatch"),
                                         Not(HasSubstr("node-secret")), Not(HasSubstr("head-guess"))));
  EXPECT_EQ(node->service().state(), proto::NODE_STATE_WAITING_FOR_HEAD);
}

TEST(NodeClientTest, PrefixOfTheTokenIsRejected) {
  auto node = StartNode(std::string("node-secret"));
  ASSERT_NE(node, nullptr);
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), WithToken("node-secre"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(NodeClientTest, MissingTokenIsUnauthenticated) {
  auto node = StartNode(std::string("node-secret"));
  ASSERT_NE(node, nullptr);
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), WithToken(""));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Message(c.status()), HasSubstr("requires an auth token"));
}

TEST(NodeClientTest, HeadWithATokenRefusesANodeWithout) {
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), WithToken("head-secret"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Message(c.status()), AllOf(HasSubstr(node->address()), HasSubstr("has no auth token")));
}

TEST(NodeClientTest, NodeWithoutTokenAcceptsAHeadWithout) {
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), WithToken(""));
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST(NodeClientTest, HealthShowsDetailsOnlyToTheSessionsHead) {
  auto node = StartNode(std::string("tok"));
  ASSERT_NE(node, nullptr);
  auto c = NodeClient::Connect(node->address(), WithToken("tok"));
  ASSERT_TRUE(c.ok()) << c.status();
  auto stranger = proto::NodeService::NewStub(grpc::CreateChannel(node->address(), grpc::InsecureChannelCredentials()));
  for (const std::string& id : {std::string(), std::string("0123456789abcdef0123456789abcdef")}) {
    grpc::ClientContext ctx;
    proto::HealthRequest req;
    req.set_session_id(id);
    proto::HealthResponse r;
    ASSERT_TRUE(stranger->Health(&ctx, req, &r).ok());
    EXPECT_EQ(r.state(), proto::NODE_STATE_CONNECTED);  // the state, and nothing about build or head
    EXPECT_TRUE(r.build_id().empty());
    EXPECT_TRUE(r.head_name().empty());
    EXPECT_EQ(r.protocol_version(), 0u);
  }
  absl::StatusOr<proto::HealthResponse> mine = (*c)->Health();
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine->build_id(), kBuildId);
}

TEST(NodeClientTest, ProtocolVersionMismatchNamesBothVersions) {
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  ConnectOptions o = WithToken("");
  o.protocol_version = 999;
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(c.status()),
              AllOf(HasSubstr("protocol version mismatch"), HasSubstr("head speaks 999"),
                    HasSubstr(fmt::format("node speaks {}", proto::kNodeProtocolVersion)), HasSubstr(node->address()),
                    Not(HasSubstr(kBuildId))));
}

TEST(NodeClientTest, OlderNodeProtocolIsRefused) {
  node::NodeOptions opts;
  opts.protocol_version = proto::kNodeProtocolVersion + 1;
  auto node = StartNode(std::nullopt, opts);
  ASSERT_NE(node, nullptr);
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), WithToken(""));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(c.status()), AllOf(HasSubstr(fmt::format("head speaks {}", proto::kNodeProtocolVersion)),
                                         HasSubstr(fmt::format("node speaks {}", proto::kNodeProtocolVersion + 1))));
}

TEST(NodeClientTest, BuildIdMismatchNamesBothBuilds) {
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  ConnectOptions o = WithToken("");
  o.build_id = "9.9.9+0123456789ab";
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(c.status()), AllOf(HasSubstr("build id mismatch"), HasSubstr("head 9.9.9+0123456789ab"),
                                         HasSubstr(fmt::format("node {}", kBuildId))));
}

TEST(NodeClientTest, TokenIsCheckedBeforeVersions) {
  auto node = StartNode(std::string("node-secret"));
  ASSERT_NE(node, nullptr);
  ConnectOptions o = WithToken("wrong");
  o.build_id = "other";
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(node->address(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Message(c.status()), Not(HasSubstr(kBuildId)));
}

TEST(NodeClientTest, ASecondHeadWaitsUntilTheFirstSessionEnds) {
  node::NodeOptions opts;
  opts.unattached_session_timeout = milliseconds(400);
  auto node = StartNode(std::nullopt, opts);
  ASSERT_NE(node, nullptr);
  auto a = NodeClient::Connect(node->address(), WithToken(""));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE((*a)->Attach([](const std::string&) {}).ok());
  auto b = NodeClient::Connect(node->address(), WithToken(""));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Message(b.status()), HasSubstr("busy"));
  // The first head goes away: the node is free at once.
  (*a)->Close();
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<NodeClient>> c;
  do {
    c = NodeClient::Connect(node->address(), WithToken(""));
  } while (!c.ok() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  ASSERT_TRUE(c.ok()) << c.status();
  // A head that authenticates and never attaches holds the node only briefly.
  std::this_thread::sleep_for(milliseconds(900));
  EXPECT_EQ(node->service().state(), proto::NODE_STATE_WAITING_FOR_HEAD);
  auto d = NodeClient::Connect(node->address(), WithToken(""));
  EXPECT_TRUE(d.ok()) << d.status();
}

TEST(NodeClientTest, CallsOutsideTheSessionAreRefused) {
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  auto c = NodeClient::Connect(node->address(), WithToken(""));
  ASSERT_TRUE(c.ok()) << c.status();
  auto stub = proto::NodeService::NewStub(grpc::CreateChannel(node->address(), grpc::InsecureChannelCredentials()));
  {  // a made-up session
    grpc::ClientContext ctx;
    proto::ShutdownRequest req;
    req.set_session_id("00000000000000000000000000000000");
    proto::ShutdownResponse r;
    EXPECT_EQ(stub->Shutdown(&ctx, req, &r).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  {  // the right session, not attached yet
    grpc::ClientContext ctx;
    auto stream = stub->LoadShard(&ctx);
    proto::LoadShardRequest req;
    req.mutable_offer()->set_session_id((*c)->session_id());
    stream->Write(req);
    stream->WritesDone();
    grpc::Status st = stream->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(st.error_message(), HasSubstr("attach"));
  }
  {  // a made-up session on the collective
    grpc::ClientContext ctx;
    auto stream = stub->InitCollective(&ctx);
    proto::RendezvousMessage m;
    m.mutable_setup()->set_session_id("x");
    stream->Write(m);
    stream->WritesDone();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  {  // Attach to someone else's session
    grpc::ClientContext ctx;
    auto stream = stub->Attach(&ctx);
    proto::HeadMessage m;
    m.mutable_attach()->set_session_id("nope");
    stream->Write(m);
    stream->WritesDone();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
}

TEST(NodeClientTest, AChallengeAnswersOnce) {
  auto node = StartNode(std::string("tok"));
  ASSERT_NE(node, nullptr);
  auto stub = proto::NodeService::NewStub(grpc::CreateChannel(node->address(), grpc::InsecureChannelCredentials()));
  proto::HelloRequest hello;
  hello.set_protocol_version(proto::kNodeProtocolVersion);
  hello.set_head_nonce(std::string(32, 'h'));
  proto::HelloResponse ch;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->Hello(&ctx, hello, &ch).ok());
  }
  EXPECT_TRUE(ch.token_required());
  EXPECT_EQ(ch.node_nonce().size(), 32u);
  proto::AuthenticateRequest auth;
  auth.set_challenge_id(ch.challenge_id());
  auth.set_head_proof(proto::HeadProof("tok", hello.head_nonce(), ch.node_nonce()));
  auth.set_build_id(kBuildId);
  auth.set_tp_rank(1);
  auth.set_tp_world_size(2);
  proto::AuthenticateResponse r;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->Authenticate(&ctx, auth, &r).ok());
  }
  EXPECT_EQ(r.node_proof(), proto::NodeProof("tok", ch.node_nonce(), hello.head_nonce()));
  {  // replayed
    grpc::ClientContext ctx;
    proto::AuthenticateResponse again;
    EXPECT_EQ(stub->Authenticate(&ctx, auth, &again).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
}

TEST(NodeClientTest, UnreachableNodeFailsQuicklyWithADeadlineError) {
  const std::string target = fmt::format("127.0.0.1:{}", testing::UnusedLoopbackPort());
  ConnectOptions o = WithToken("");
  o.timeout = milliseconds(500);
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(target, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_THAT(Message(c.status()), AllOf(HasSubstr(target), HasSubstr("no answer to Hello within 0.5 s")));
  EXPECT_LT(seconds, 2.0);
}

TEST(NodeClientTest, PeerThatNeverAnswersFailsQuicklyWithADeadlineError) {
  testing::LoopbackSocket hang(/*listen_too=*/true);  // accepts TCP, never speaks HTTP/2
  const std::string target = fmt::format("127.0.0.1:{}", hang.port());
  ConnectOptions o = WithToken("");
  o.timeout = milliseconds(500);
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(target, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_THAT(Message(c.status()), HasSubstr(target));
  EXPECT_LT(seconds, 2.0);
}

TEST(NodeClientTest, ConnectWaitsForANodeThatStartsLater) {
  const int port = testing::UnusedLoopbackPort();
  ConnectOptions o = WithToken("");
  o.timeout = milliseconds(5000);
  auto pending = std::async(std::launch::async,
                            [&] { return NodeClient::Connect(fmt::format("127.0.0.1:{}", port), o); });
  std::this_thread::sleep_for(milliseconds(300));
  node::NodeOptions opts;
  opts.port = port;
  auto node = StartNode(std::nullopt, opts);
  ASSERT_NE(node, nullptr);
  absl::StatusOr<std::unique_ptr<NodeClient>> c = pending.get();
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST(NodeServerTest, PortInUseIsAClearError) {
  testing::LoopbackSocket taken(/*listen_too=*/true);  // without SO_REUSEPORT: gRPC cannot share it
  node::NodeOptions opts;
  opts.host = "127.0.0.1";
  opts.port = taken.port();
  absl::StatusOr<std::unique_ptr<node::NodeServer>> s = node::NodeServer::Start(opts);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Message(s.status()), HasSubstr(fmt::format("cannot listen on 127.0.0.1:{}", taken.port())));
}

TEST(NodeServerTest, JoinHostPortBracketsIpv6) {
  EXPECT_EQ(node::JoinHostPort("127.0.0.1", 5), "127.0.0.1:5");
  EXPECT_EQ(node::JoinHostPort("::1", 29500), "[::1]:29500");
  EXPECT_EQ(node::JoinHostPort("[::1]", 29500), "[::1]:29500");
}

}  // namespace
}  // namespace sparkserve::engine
