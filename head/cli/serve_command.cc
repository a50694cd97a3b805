// `sparkserve serve MODEL_DIR [...]`: the OpenAI + Anthropic HTTP server. Listens first (so
// /health answers 503 while the model loads), then loads the tokenizer, chat template and model,
// starts the engine, and serves until SIGTERM/SIGINT: then new requests get 503, in-flight ones
// finish (up to --drain-timeout; what is left then ends with an error event), and the process
// exits 0. A signal during the model load exits at once; so does a second signal.
#include <sys/resource.h>

#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>
#include <filesystem>
#include <memory>
#include <string>

#include "text/output/output_parser.h"
#include "engine/cluster/cluster_setup.h"
#include "head/cli/model_path.h"
#include "head/cli/cluster_flags.h"
#include "head/cli/commands.h"
#include "head/cli/model_command_args.h"
#include "head/cli/runner_flags.h"
#include "engine/engine.h"
#include "head/http/api_server.h"
#include "head/http/generation.h"
#include "head/http/http_server.h"
#include "head/http/model_output_parser.h"
#include "head/http/model_text_codec.h"
#include "text/constraint/grammar_compiler.h"
#include "spdlog/spdlog.h"

namespace sparkserve::head {
namespace {

model::RunnerOptions AutoBackend() {
  model::RunnerOptions o;
  o.backend = model::Backend::kAuto;
  return o;
}

struct ServeArgs {
  std::string dir;
  std::string host = "127.0.0.1";
  int port = 8000;
  model::RunnerOptions runner = AutoBackend();
  SpecFlags spec;
  ClusterFlags cluster;
  int max_tokens = 0;
  int prefill_chunk = 0;  // 0: the step budget
  std::string api_key;
  std::string served_model_name;
  int max_queue = 256;
  int io_threads = 2;
  int max_body_mb = 32;
  int64_t max_connections = 0;  // 0: max(256, max_queue + max_batch + 128)
  int max_stop_strings = 16;
  int max_stop_string_bytes = 256;
  int render_threads = 2;
  std::string output_parser = "qwen3_5";
  int drain_timeout_s = 60;
  bool enforce_eager = false;
  // Prefix cache.
  bool no_prefix_cache = false;
  int prefix_slots = -1;              // -1: max(8, max_batch)
  int prefix_interval = 1024;         // a CPU sweep of 0/256/512/1024/2048 chose 1024
  double prefix_fraction = 0.5;       // of the KV pool
};

// Sampling defaults from generation_config.json (a request's own fields win).
scheduler::SamplingParams DefaultSampling(const model::Qwen35Config& config) {
  scheduler::SamplingParams s;
  if (!config.generation) return s;
  const auto& g = *config.generation;
  if (g.temperature) s.temperature = static_cast<float>(*g.temperature);
  if (g.do_sample && !*g.do_sample) s.temperature = 0.0f;
  if (g.top_p) s.top_p = static_cast<float>(*g.top_p);
  if (g.top_k) s.top_k = static_cast<int32_t>(*g.top_k);
  if (g.min_p) s.min_p = static_cast<float>(*g.min_p);
  if (g.repetition_penalty) s.repetition_penalty = static_cast<float>(*g.repetition_penalty);
  if (g.presence_penalty) s.presence_penalty = static_cast<float>(*g.presence_penalty);
  return s;
}

// Waits for the nodes to sync (they may still be starting): OK, or a failure retrying cannot fix
// (token, build, a shard the nodes cannot build). A signal meanwhile exits the process (ShutdownSignals:
// nothing was accepted yet).
absl::Status WaitForNodes(engine::cluster::ClusterRunner& cluster) {
  const auto started = std::chrono::steady_clock::now();
  auto last_log = started;
  while (true) {
    absl::Status st = cluster.WaitUntilServing(std::chrono::milliseconds(500));
    if (st.ok() || !absl::IsDeadlineExceeded(st)) return st;
    if (std::chrono::steady_clock::now() - last_log > std::chrono::seconds(10)) {
      last_log = std::chrono::steady_clock::now();
      spdlog::info("serve: still waiting for the nodes ({:.0f} s): {}",
                   std::chrono::duration<double>(last_log - started).count(), cluster.status().detail);
    }
  }
}

// SIGTERM/SIGINT, taken by a thread of their own (blocked everywhere else). The first one during
// the model load exits at once (nothing was accepted yet); the first one while serving starts the
// drain; a second one exits at once.
class ShutdownSignals : public std::enable_shared_from_this<ShutdownSignals> {
 public:
  ShutdownSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);  // before any other thread starts
  }
  void Start() {
    std::thread([self = shared_from_this()] { self->Loop(); }).detach();  // lives until the process exits
  }
  // The model is loaded: from now on the first signal drains.
  void Serving() {
    std::lock_guard lock(mu_);
    loading_ = false;
  }
  // Blocks until the first signal while serving; returns it.
  int Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return requested_ != 0; });
    return requested_;
  }

 private:
  void Loop() {
    for (;;) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      std::unique_lock lock(mu_);
      if (loading_) ExitNow(fmt::format("signal {} during the model load: exiting now", sig), 0);
      if (requested_ != 0) ExitNow(fmt::format("second signal ({}): exiting now, without draining", sig), 128 + sig);
      requested_ = sig;
      cv_.notify_all();
    }
  }
  [[noreturn]] static void ExitNow(const std::string& message, int code) {
    spdlog::warn("serve: {}", message);
    spdlog::default_logger()->flush();
    std::fflush(stdout);
    std::_Exit(code);
  }
  sigset_t set_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool loading_ = true;
  int requested_ = 0;
};

// Raises the soft limit on open files to the hard one (connections are file descriptors); returns it.
uint64_t RaiseOpenFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit want = lim;
    want.rlim_cur = std::min<rlim_t>(lim.rlim_max, 1 << 20);
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) lim = want;
  }
  return lim.rlim_cur == RLIM_INFINITY ? (1u << 20) : static_cast<uint64_t>(lim.rlim_cur);
}

int Serve(const ServeArgs& a) {
  absl::StatusOr<ResolvedCluster> cluster_flags = ResolveClusterFlags(a.cluster, a.runner.backend);
  if (!cluster_flags.ok()) {
    spdlog::error("serve: {}", std::string(cluster_flags.status().message()));
    return 2;
  }
  if (a.port < 0 || a.port > 65535 || a.runner.max_batch < 1 || a.runner.max_seq_len < 2 || a.max_tokens < 0 ||
      a.prefill_chunk < 0 || a.max_queue < 1 || a.io_threads < 1 || a.max_body_mb < 1 || a.max_connections < 0 ||
      a.max_stop_strings < 0 || a.max_stop_string_bytes < 1 || a.render_threads < 1 || a.prefix_interval < 0 ||
      !(a.prefix_fraction >= 0.0 && a.prefix_fraction <= 1.0)) {
    spdlog::error("serve: out-of-range option (check --port, --max-batch, --max-seq-len, --max-tokens, "
                  "--prefill-chunk, --max-queue, --io-threads, --max-body-mb, --max-connections, "
                  "--max-stop-strings, --max-stop-string-bytes, --render-threads, --prefix-checkpoint-interval, "
                  "--prefix-cache-fraction)");
    return 2;
  }
  auto family = text::ParseModelFamily(a.output_parser);
  if (!family.ok()) {
    spdlog::error("serve: --output-parser: {}", std::string(family.status().message()));
    return 2;
  }

  auto signals = std::make_shared<ShutdownSignals>();  // blocks SIGTERM/SIGINT before any thread starts
  signals->Start();
  const uint64_t open_files = RaiseOpenFileLimit();
  int64_t max_connections = a.max_connections;
  if (max_connections == 0) {
    max_connections = std::max<int64_t>(256, int64_t{a.max_queue} + a.runner.max_batch + 128);
    // Leave descriptors for the model files, the engine and the logs.
    max_connections = std::max<int64_t>(16, std::min<int64_t>(max_connections, static_cast<int64_t>(open_files) - 128));
  } else if (static_cast<uint64_t>(max_connections) + 64 > open_files) {
    spdlog::warn("serve: --max-connections {} is close to the open-file limit ({}); accepting may fail before it",
                 max_connections, open_files);
  }

  std::atomic<bool> ready{false};
  http::ServingContext ctx;
  ctx.model_name = a.served_model_name.empty()
                       ? std::filesystem::path(a.dir).lexically_normal().filename().string()
                       : a.served_model_name;
  if (const quant::ModelSource* packed = PackedSourceOf(a.dir); packed != nullptr && a.served_model_name.empty()) {
    ctx.model_name = std::filesystem::path(packed->path()).stem().string();  // model.sparkserve -> model
  }
  if (ctx.model_name.empty()) ctx.model_name = std::filesystem::absolute(a.dir).parent_path().filename().string();
  ctx.created_unix = http::UnixNow();
  ctx.max_seq_len = a.runner.max_seq_len;
  ctx.default_max_tokens = a.max_tokens;
  ctx.api_key = a.api_key;
  ctx.ready = &ready;
  ctx.max_stop_strings = a.max_stop_strings;
  ctx.max_stop_string_bytes = a.max_stop_string_bytes;
  ctx.parser_factory = http::MakeModelPieceParserFactory(*family);
  ctx.tool_call_markup = http::ToolCallMarkupFor(*family);
  // With nodes, /health and the model's routes answer 503 until they are synced (and whenever the
  // group is degraded); the runner appears once loaded.
  std::atomic<engine::cluster::ClusterRunner*> cluster_runner{nullptr};
  if (!cluster_flags->options.nodes.empty()) {
    ctx.cluster = [&cluster_runner, world = static_cast<int32_t>(cluster_flags->options.nodes.size()) + 1] {
      engine::cluster::ClusterRunner* c = cluster_runner.load();
      if (c != nullptr) return c->status();
      engine::cluster::ClusterStatus s;
      s.detail = "loading the model";
      s.world = world;
      return s;
    };
  }
  http::ServingMetrics metrics(ctx.model_name);
  http::ApiServer api(ctx, &metrics, a.render_threads);

  http::HttpServerOptions opts;
  opts.host = a.host;
  opts.port = static_cast<uint16_t>(a.port);
  opts.io_threads = a.io_threads;
  opts.max_body_bytes = static_cast<uint64_t>(a.max_body_mb) << 20;
  opts.max_connections = max_connections;
  opts.error_response = &http::ApiServer::TransportError;
  http::HttpServer server(opts, [&api](http::HttpRequest r, std::shared_ptr<http::ResponseChannel> c) {
    api.Handle(std::move(r), std::move(c));
  });
  // On every return, before `server` is destroyed: stop it, then let the render workers finish
  // (their tasks hold channels, which must not outlive the server).
  struct StopInOrder {
    http::HttpServer& server;
    http::ApiServer& api;
    ~StopInOrder() {
      server.Stop();
      api.Join();
    }
  } stop_in_order{server, api};
  metrics.SetTransportGauges([&server] { return server.in_flight(); }, [&server] { return server.connections(); });
  if (auto st = server.Start(); !st.ok()) {
    spdlog::error("serve: {}", std::string(st.message()));
    return 1;
  }
  // The port line goes to stdout (tests and scripts read it to find an ephemeral port).
  std::printf("listening on http://%s:%u\n", a.host.c_str(), server.port());
  std::fflush(stdout);

  auto codec = http::ModelTextCodec::Load(a.dir);
  if (!codec.ok()) {
    spdlog::error("serve: {}: {}", a.dir, std::string(codec.status().message()));
    server.Stop();
    return 1;
  }
  model::RunnerOptions runner = a.runner;
  const bool prefix_cache = !a.no_prefix_cache;
  if (prefix_cache) runner.extra_slots = a.prefix_slots >= 0 ? a.prefix_slots : std::max(8, runner.max_batch);
  runner.max_step_tokens = std::max(runner.max_step_tokens, runner.max_batch + runner.extra_slots);
  runner.cuda_graphs = !a.enforce_eager;
  ApplySpecToRunner(a.spec, &runner);
  engine::cluster::ClusterRunner* cluster = nullptr;
  auto loaded = engine::cluster::LoadRunner(a.dir, runner, cluster_flags->options, &cluster);
  if (!loaded.ok()) {
    spdlog::error("serve: loading {} (--backend {}): {}", a.dir, model::BackendName(runner.backend),
                  std::string(loaded.status().message()));
    server.Stop();
    return 1;
  }
  if (cluster != nullptr) {
    cluster_runner.store(cluster);
    if (absl::Status st = WaitForNodes(*cluster); !st.ok()) {
      spdlog::error("serve: the nodes cannot join: {}", std::string(st.message()));
      server.Stop();
      return 1;
    }
  }
  const model::Qwen35Config config = loaded->config;
  engine::EngineConfig ec;
  ec.scheduler.max_batch = runner.max_batch;
  ec.scheduler.prefill_chunk = a.prefill_chunk;
  ec.scheduler.max_step_tokens = runner.max_step_tokens;
  ec.scheduler.prefix.enabled = prefix_cache && runner.extra_slots > 0;
  ec.scheduler.prefix.checkpoint_interval = a.prefix_interval;
  ec.scheduler.prefix.max_pages =
      static_cast<int32_t>(a.prefix_fraction * loaded->runner->capacity().num_kv_pages);
  ctx.prefix_cache = ec.scheduler.prefix.enabled;
  ec.max_waiting_requests = a.max_queue;
  ec.eos_token_ids = config.stop_token_ids();
  auto spec = ResolveSpec(a.spec, *loaded->runner);
  if (!spec.ok()) {
    spdlog::error("serve: {}", std::string(spec.status().message()));
    server.Stop();
    return 2;
  }
  ec.spec = *spec;
  auto engine = engine::Engine::Create(std::move(loaded->runner), ec);
  if (!engine.ok()) {
    spdlog::error("serve: starting the engine: {}", std::string(engine.status().message()));
    server.Stop();
    return 1;
  }
  (*engine)->Start();
  ctx.codec = codec->get();
  ctx.engine = engine->get();
  // Structured outputs: grammars compiled against the model's vocabulary (its rows past the
  // tokenizer's ids have no text), cached by content.
  ctx.grammars = std::make_shared<text::constraint::GrammarCompiler>(
      text::constraint::TokenVocabulary::FromTokenizer((*codec)->tokenizer(), (*engine)->capacity().vocab_size));
  ctx.reasoning_end = *family == text::ModelFamily::kNone ? "" : "</think>";
  ctx.default_sampling = DefaultSampling(config);
  ready.store(true, std::memory_order_release);  // publishes ctx.codec, ctx.engine, default_sampling
  signals->Serving();
  spdlog::info("serve: model '{}' ready on http://{}:{} ({}, max_batch {}, max_seq_len {}, eos {})", ctx.model_name,
               a.host, server.port(), loaded->backend_description, runner.max_batch, runner.max_seq_len, fmt::join(ec.eos_token_ids, ","));

  const int sig = signals->Wait();
  spdlog::info("serve: signal {}: refusing new requests, draining {} in flight (a second signal exits at once)", sig,
               server.in_flight());
  server.BeginDrain();
  if (!server.WaitDrained(std::chrono::seconds(a.drain_timeout_s))) {
    spdlog::warn("serve: {} requests still in flight after {} s; aborting them", server.in_flight(),
                 a.drain_timeout_s);
  }
  (*engine)->Shutdown();  // what is left ends with an error event; give the streams a moment to say so
  server.WaitDrained(std::chrono::seconds(5));
  const engine::EngineStats stats = (*engine)->Stats();
  spdlog::info("serve: structured outputs: {} grammars compiled ({} cache hits); masks computed for {:.3f} s, "
               "steps waited {:.3f} s for them", ctx.grammars->misses(), ctx.grammars->hits(),
               stats.constraint_mask_seconds_total, stats.constraint_wait_seconds_total);
  server.Stop();
  api.Join();  // before the engine and codec go (a worker may still be rendering or tokenizing)
  spdlog::info("serve: stopped");
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("serve", "serve a model over the OpenAI and Anthropic HTTP APIs");
  auto a = std::make_shared<ServeArgs>();
  AcceptModelPath(cmd,
                  cmd->add_option("MODEL_DIR", a->dir,
                                  "model directory (config.json, safetensors, tokenizer.json, chat template), packed "
                                  "model file (`sparkserve pack`) or qwen35 GGUF file")
                      ->required(),
                  &a->dir, {.requantize = true});
  cmd->add_option("--host", a->host, "address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", a->port, "port (default 8000; 0 = any free port)");
  AddBackendOption(cmd, &a->runner, "auto");
  AddSpecOptions(cmd, &a->spec);
  cmd->add_flag("--enforce-eager", a->enforce_eager, "cuda: run decode steps without CUDA graphs (slower; for debugging)");
  cmd->add_option("--gpu-memory-utilization", a->runner.gpu_memory_utilization,
                  "cuda: fraction of the GPU's memory to use (default 0.9); the KV cache gets what weights, state "
                  "and activations leave, up to --max-batch sequences of --max-seq-len");
  AddClusterOptions(cmd, &a->cluster);
  cmd->add_option("--max-batch", a->runner.max_batch, "running sequences at most (default 8)");
  cmd->add_option("--max-seq-len", a->runner.max_seq_len, "prompt + output tokens per sequence (default 4096)");
  cmd->add_option("--max-tokens", a->max_tokens, "output cap when a request sets none (default 0: the context)");
  cmd->add_option("--prefill-chunk", a->prefill_chunk, "most prompt tokens one sequence prefills per step (default 0: the whole step budget, as vLLM; "
                  "lower it to keep decodes flowing beside long prompts)");
  cmd->add_option("--max-num-batched-tokens", a->runner.max_step_tokens, "token budget of one step: prefill chunks + decodes (default 8192; lower it on small GPUs to bound a "
                  "step's latency and activation memory)");
  AddCacheDtypeOptions(cmd, &a->runner);
  cmd->add_flag("--w4a4-prefill", a->runner.w4a4_prefill,
                "cuda, Blackwell sm_120/121 only: prefill NVFP4 linears as W4A4 (activations quantised with the "
                "checkpoint's calibrated input scales) on FP4 tensor cores; EXPERIMENTAL, not yet run on hardware");
  cmd->add_option("--api-key", a->api_key, "require 'Authorization: Bearer KEY' or 'x-api-key: KEY'")
      ->envname("SPARKSERVE_API_KEY");
  cmd->add_option("--served-model-name", a->served_model_name, "model id in the API (default: MODEL_DIR's name)");
  cmd->add_option("--max-queue", a->max_queue, "waiting requests at most; beyond: 429 (default 256)");
  cmd->add_option("--io-threads", a->io_threads, "HTTP I/O threads (default 2)");
  cmd->add_option("--max-body-mb", a->max_body_mb, "request body limit in MiB; beyond: 413 (default 32)");
  cmd->add_option("--max-connections", a->max_connections,
                  "open client connections at most; beyond: 503 and close (default 0: max(256, max-queue + "
                  "max-batch + 128), within the open-file limit)");
  cmd->add_option("--max-stop-strings", a->max_stop_strings, "stop strings per request at most; beyond: 400 (default 16)");
  cmd->add_option("--max-stop-string-bytes", a->max_stop_string_bytes,
                  "bytes per stop string at most; beyond: 400 (default 256)");
  cmd->add_option("--render-threads", a->render_threads,
                  "threads that render chat templates and tokenize requests, off the I/O threads (default 2)");
  cmd->add_option("--output-parser", a->output_parser, "reasoning/tool-call markup: qwen3_5|qwen3|none (default qwen3_5)");
  cmd->add_flag("--no-prefix-cache", a->no_prefix_cache, "turn the prefix cache off (on by default: requests resume "
                "from cached state of the longest shared prefix: KV pages and GDN state checkpoints)");
  cmd->add_option("--prefix-cache-slots", a->prefix_slots,
                  "state slots beyond --max-batch for prefix-cache checkpoints (default: max(8, --max-batch))");
  cmd->add_option("--prefix-checkpoint-interval", a->prefix_interval,
                  "checkpoint the state every N prompt tokens, besides message ends (default 1024; 0: message ends only)");
  cmd->add_option("--prefix-cache-fraction", a->prefix_fraction,
                  "share of the KV pool cached prefixes may hold (default 0.5); running requests always win");
  cmd->add_option("--drain-timeout", a->drain_timeout_s, "seconds to let requests finish on SIGTERM (default 60)");
  cmd->callback([=] {
    UseStderrLogging(cmd);
    *exit_code = Serve(*a);
  });
}

}  // namespace sparkserve::head
