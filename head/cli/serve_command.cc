// `sparkserve serve MODEL_DIR [...]`: the OpenAI + Anthropic HTTP server. Listens first (so
// /health answers 503 while the model loads), then loads the tokenizer, chat template and model,
// starts the engine, and serves until SIGTERM/SIGINT: then new requests get 503, in-flight ones
// finish (up to --drain-timeout), and the process exits 0.
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>

#include "text/output/output_parser.h"
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
  int tp = 1;
  std::string nodes;
  int max_tokens = 0;
  int prefill_chunk = 0;  // 0: the step budget
  std::string api_key;
  std::string served_model_name;
  int max_queue = 256;
  int io_threads = 2;
  int max_body_mb = 32;
  std::string output_parser = "qwen3_5";
  int drain_timeout_s = 60;
  bool enforce_eager = false;
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

int Serve(const ServeArgs& a) {
  if (a.tp != 1 || !a.nodes.empty()) {
    spdlog::error("serve: tensor parallelism (--tp/--nodes) is not wired into serve yet; use --tp 1");
    return 2;
  }
  if (a.port < 0 || a.port > 65535 || a.runner.max_batch < 1 || a.runner.max_seq_len < 2 || a.max_tokens < 0 ||
      a.prefill_chunk < 0 || a.max_queue < 1 || a.io_threads < 1 || a.max_body_mb < 1) {
    spdlog::error("serve: out-of-range option (check --port, --max-batch, --max-seq-len, --max-tokens, "
                  "--prefill-chunk, --max-queue, --io-threads, --max-body-mb)");
    return 2;
  }
  auto family = text::ParseModelFamily(a.output_parser);
  if (!family.ok()) {
    spdlog::error("serve: --output-parser: {}", std::string(family.status().message()));
    return 2;
  }

  // SIGTERM/SIGINT are taken by sigwait below: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::atomic<bool> ready{false};
  http::ServingContext ctx;
  ctx.model_name = a.served_model_name.empty()
                       ? std::filesystem::path(a.dir).lexically_normal().filename().string()
                       : a.served_model_name;
  if (ctx.model_name.empty()) ctx.model_name = std::filesystem::absolute(a.dir).parent_path().filename().string();
  ctx.created_unix = http::UnixNow();
  ctx.max_seq_len = a.runner.max_seq_len;
  ctx.default_max_tokens = a.max_tokens;
  ctx.api_key = a.api_key;
  ctx.ready = &ready;
  ctx.parser_factory = http::MakeModelPieceParserFactory(*family);
  ctx.tool_call_markup = http::ToolCallMarkupFor(*family);
  http::ServingMetrics metrics(ctx.model_name);
  http::ApiServer api(ctx, &metrics);

  http::HttpServerOptions opts;
  opts.host = a.host;
  opts.port = static_cast<uint16_t>(a.port);
  opts.io_threads = a.io_threads;
  opts.max_body_bytes = static_cast<uint64_t>(a.max_body_mb) << 20;
  opts.error_response = &http::ApiServer::TransportError;
  http::HttpServer server(opts, [&api](http::HttpRequest r, std::shared_ptr<http::ResponseChannel> c) {
    api.Handle(std::move(r), std::move(c));
  });
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
  runner.max_step_tokens = std::max(runner.max_step_tokens, runner.max_batch);
  runner.cuda_graphs = !a.enforce_eager;
  ApplySpecToRunner(a.spec, &runner);
  auto loaded = model::LoadModelRunner(a.dir, runner);
  if (!loaded.ok()) {
    spdlog::error("serve: loading {} (--backend {}): {}", a.dir, model::BackendName(runner.backend),
                  std::string(loaded.status().message()));
    server.Stop();
    return 1;
  }
  const model::Qwen35Config config = loaded->config;
  engine::EngineConfig ec;
  ec.scheduler.max_batch = runner.max_batch;
  ec.scheduler.prefill_chunk = a.prefill_chunk;
  ec.scheduler.max_step_tokens = runner.max_step_tokens;
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
  ready.store(true);
  spdlog::info("serve: model '{}' ready on http://{}:{} ({}, max_batch {}, max_seq_len {}, eos {})", ctx.model_name,
               a.host, server.port(), loaded->backend_description, runner.max_batch, runner.max_seq_len, fmt::join(ec.eos_token_ids, ","));

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("serve: signal {}: refusing new requests, draining {} in flight", sig, server.in_flight());
  server.BeginDrain();
  if (!server.WaitDrained(std::chrono::seconds(a.drain_timeout_s))) {
    spdlog::warn("serve: {} requests still in flight after {} s; aborting them", server.in_flight(),
                 a.drain_timeout_s);
  }
  (*engine)->Shutdown();
  const engine::EngineStats stats = (*engine)->Stats();
  spdlog::info("serve: structured outputs: {} grammars compiled ({} cache hits); masks computed for {:.3f} s, "
               "steps waited {:.3f} s for them", ctx.grammars->misses(), ctx.grammars->hits(),
               stats.constraint_mask_seconds_total, stats.constraint_wait_seconds_total);
  server.Stop();
  spdlog::info("serve: stopped");
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("serve", "serve a model over the OpenAI and Anthropic HTTP APIs");
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("MODEL_DIR", a->dir, "model directory (config.json, safetensors, tokenizer.json, chat template)")
      ->required();
  cmd->add_option("--host", a->host, "address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", a->port, "port (default 8000; 0 = any free port)");
  AddBackendOption(cmd, &a->runner, "auto");
  AddSpecOptions(cmd, &a->spec);
  cmd->add_flag("--enforce-eager", a->enforce_eager, "cuda: run decode steps without CUDA graphs (slower; for debugging)");
  cmd->add_option("--gpu-memory-utilization", a->runner.gpu_memory_utilization,
                  "cuda: fraction of the GPU's memory to use (default 0.9); the KV cache gets what weights, state "
                  "and activations leave, up to --max-batch sequences of --max-seq-len");
  cmd->add_option("--tp", a->tp, "tensor-parallel ranks (only 1 so far)");
  cmd->add_option("--nodes", a->nodes, "host:port,... of sparkserve-node daemons (not wired yet)");
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
  cmd->add_option("--output-parser", a->output_parser, "reasoning/tool-call markup: qwen3_5|qwen3|none (default qwen3_5)");
  cmd->add_option("--drain-timeout", a->drain_timeout_s, "seconds to let requests finish on SIGTERM (default 60)");
  cmd->callback([=] {
    UseStderrLogging(cmd);
    *exit_code = Serve(*a);
  });
}

}  // namespace sparkserve::head
