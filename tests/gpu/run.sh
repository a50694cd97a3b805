#!/usr/bin/env bash
# The GPU suite, one command for a machine with a GPU, run from the repository root:
#   tests/gpu/run.sh [BIN_DIR]      (default build/bin, or a bundle's bin/ made by deploy/bundle.sh)
# Sections (SPARKSERVE_GPU_SECTIONS, comma-separated, default all of them):
#   ops     gpu_ops_test: every CUDA op against the CPU reference on fresh random inputs
#   blackwell gpu_blackwell_test: the W4A4 linear's block-scaled FP4 mma.sync; runs only where
#           nvidia-smi reports compute capability 12.x (sm_120 / sm_121: the instruction does not
#           exist on sm_100), else the summary says "NOT-RUN" (not a pass)
#   kernels gpu_kernel_check: decode linear checks + timings against the copy bandwidth
#   model   gpu_model_test: the CUDA runner against the CPU runner (golden fixtures, demo models)
#   tp1gpu  gpu_tp_test: tensor parallelism on one GPU, two ranks as threads over the in-process
#           group's host-staged device path, against TP=1 (logits, greedy, device sampling over the
#           split vocabulary, segmented decode graphs), the split sampler on identical logits, NCCL's
#           one-GPU checks (a one-rank group, a peer that never joins failing within its timeout)
#   e2e     the HTTP e2e suite (official openai/anthropic SDKs) with `serve --backend cuda`
#   structured  structured outputs: `bench serve` of the random 4B model at 1 and 64 users with every
#           request constrained (a JSON schema that cannot end before max_tokens) against the same
#           runs unconstrained (issue 27's target: within 5% at 64 users)
#   spec    speculative decoding with n-gram drafts verified on the GPU (MTP: the mtp section):
#           greedy output with --spec ngram k=1..5 equals --spec off through `run` and 8 HTTP users
#           (golden fixtures), the step cost curve of the random 4B model (bench engine --spec), and
#           `bench serve` at 1, 8 and 64 users with --spec ngram against --spec off (the auto
#           policy must turn itself down: never slower)
#   mtp     MTP drafting on the GPU (issue 19; `--spec mtp` only, not yet the CUDA default):
#           gpu_model_test's CudaMtpVsCpu (drafts, MTP logits and verify logits against the CPU on
#           the golden fixtures and demo models), greedy `run` / 8 HTTP users with --spec mtp equal
#           --spec off (golden fixtures), the random 4B's step cost curve and MTP draft step
#           (bench engine --spec mtp), and `bench serve` at 1, 8 and 64 users with --spec mtp
#           against --spec off (random weights accept ~nothing: the policy must turn itself down;
#           MTP_SKIP_SERVE=1 leaves these out), and the draft step with --draft-vocab 32768
#   prefix  the prefix cache on the GPU: the prefix-cache e2e suite (3-turn chats, shared system
#           prompts, short repeats, --spec ngram: greedy replies equal a --no-prefix-cache server's),
#           then with the random 4B, the next turn of a ~4K-token conversation + a ~100-token user
#           turn (tests/gpu/prefix_ttft.py): first-token top-5 logprobs within 0.05 of cold, greedy
#           equal, and the TTFT with the cache against without (target <= 20 ms vs ~130 ms cold)
#   4b      a random 4B nvfp4-mixed model: logits vs CPU, `bench engine`, `bench serve` at batch 1
#           (BENCH_BATCH, BENCH_CONTEXT, BENCH_PROMPT=prompt lengths for prefill, BENCH_PROFILE=1: op times), many
#           sequences at 1K context (BENCH_WIDE_BATCH), prefill TTFT (BENCH_PREFILL), fp8 KV at 8K
#   tp      tensor parallelism across processes (issue 17) on the one GPU: this head and one
#           sparkserve-node (ranks 0 and 1) share it over --collective gloo (device tensors staged
#           through host memory; NCCL refuses two ranks on one GPU). Each tiny demo model: greedy
#           `run` ids equal TP=1 and `score` logits within the GPU tolerance of TP=1; `bench engine`
#           TP=2 against TP=1 (per-step overhead); `bench serve` through a TP=2 server; the HTTP e2e
#           suite against a TP=2 server; with the 4b section's model, bench/tp_start.sh on the CPU
#           backend (bytes shipped, time to healthy); --collective nccl on the one GPU must stop
#           at once with NCCL's "duplicate GPU" refusal.
#   tp2     (two GPUs) the same over NCCL with the node on cuda:1: greedy ids and logits of TP=2
#           against TP=1, `bench engine` TP=2, `cluster-check --collective nccl`.
#   gguf    GGUF input (issue 23): the random 4B (bf16) converted by tests/e2e/gguf_convert.py to a
#           Q4_K_M-style GGUF (needs the gguf wheel and its deps numpy, pyyaml, requests, tqdm in
#           .whl/ or installed): `run` on the GPU from it, `bench engine` of it dequantised to bf16
#           and with --requantize nvfp4-mixed, beside the 4b section's nvfp4-mixed model. Not in
#           the default list.
# Logs go to $OUT (or /tmp); a short table of results comes last. Exit 1 when any check fails.
set -uo pipefail
BIN="$(realpath "${1:-build/bin}")"
LOG_DIR="${OUT:-/tmp}"
SECTIONS="${SPARKSERVE_GPU_SECTIONS:-ops,blackwell,kernels,model,tp1gpu,e2e,structured,spec,mtp,prefix,4b}"
want() { [[ ",$SECTIONS," == *",$1,"* ]]; }
SUMMARY=()
status=0
record() {  # record NAME RC [DETAIL]
  local verdict=PASS
  [ "$2" = 0 ] || { verdict=FAIL; status=1; }
  SUMMARY+=("$(printf '%-10s %-5s %s' "$1" "$verdict" "${3:-}")")
}
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }
# serve_bench NAME MODEL MAX_BATCH MAX_SEQ_LEN IN OUT PROMPTS CONCURRENCY [SERVE FLAGS...]: `serve` MODEL on the GPU and
# `bench serve` it (random prompts of IN tokens, OUT tokens each, ignore_eos); records NAME with the
# output throughput. Logs: NAME.out / NAME.err (the server), bench_NAME.log / .json.
serve_bench() {
  local name=$1 model=$2 url=""
  "$BIN/sparkserve" serve "$model" --backend cuda --port 0 --max-batch "$3" --max-seq-len "$4" "${@:9}" \
    >"$LOG_DIR/$name.out" 2>"$LOG_DIR/$name.err" &
  local pid=$!
  for _ in $(seq 1 300); do
    url=$(sed -n 's/^listening on //p' "$LOG_DIR/$name.out")
    [ -n "$url" ] && curl -sf "$url/health" >/dev/null && break
    sleep 0.5
  done
  "$BIN/sparkserve" bench serve --url "$url" --no-progress --dataset random --random-input-len "$5" \
    --random-output-len "$6" --ignore-eos --num-prompts "$7" --max-concurrency "$8" \
    ${BENCH_EXTRA_BODY:+--extra-body "$BENCH_EXTRA_BODY"} \
    --save-result "$LOG_DIR/bench_$name.json" 2>&1 | tee "$LOG_DIR/bench_$name.log"
  record "$name" "${PIPESTATUS[0]}" "$(grep -i 'output token throughput' "$LOG_DIR/bench_$name.log" | head -1)"
  kill -TERM "$pid"; wait "$pid"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$LOG_DIR/gpu.txt"
# The shared test fixtures (tokenizer, chat template) travel as .device/fixtures.tar.xz where ../shared is absent.
if [ ! -d ../shared/fixtures ] && [ -f .device/fixtures.tar.xz ]; then mkdir -p ../shared && tar -C ../shared -xJf .device/fixtures.tar.xz; fi

if want ops; then
  t=$(date +%s)
  "$BIN/gpu_ops_test" --gtest_brief=1 2>&1 | tee "$LOG_DIR/ops.log"
  rc=${PIPESTATUS[0]}
  record ops "$rc" "$(grep -E '^\[  (PASSED|FAILED)  \]' "$LOG_DIR/ops.log" | tr '\n' ' ') ($(elapsed $t))"
fi
if want blackwell; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  if [ "${cap%%.*}" = 12 ]; then
    t=$(date +%s)
    "$BIN/gpu_blackwell_test" --gtest_brief=1 2>&1 | tee "$LOG_DIR/blackwell.log"
    rc=${PIPESTATUS[0]}
    record blackwell "$rc" "$(grep -E '^\[  (PASSED|FAILED)  \]' "$LOG_DIR/blackwell.log" | tr '\n' ' ') ($(elapsed $t))"
  else
    SUMMARY+=("$(printf '%-10s %-5s %s' blackwell NOT-RUN "needs Blackwell sm_120/sm_121 (this GPU: compute_cap ${cap:-unknown})")")
  fi
fi
if want kernels; then
  t=$(date +%s)
  "$BIN/gpu_kernel_check" 2>&1 | tee "$LOG_DIR/kernel_check.log"
  record kernels "${PIPESTATUS[0]}" "($(elapsed $t))"
fi
if want model; then
  t=$(date +%s)
  "$BIN/gpu_model_test" --gtest_brief=1 2>&1 | tee "$LOG_DIR/model.log"
  rc=${PIPESTATUS[0]}
  record model "$rc" "$(grep -c '^\[model\]' "$LOG_DIR/model.log") runs; worst $(grep -o 'logit| [0-9.e-]*' "$LOG_DIR/model.log" | awk '{print $2}' | sort -g | tail -1) ($(elapsed $t))"
fi
if want tp1gpu; then
  t=$(date +%s)
  NCCL_NVLS_ENABLE=0 "$BIN/gpu_tp_test" --gtest_brief=1 2>&1 | tee "$LOG_DIR/tp1gpu.log"
  rc=${PIPESTATUS[0]}
  record tp1gpu "$rc" "$(grep -c '^\[tp1gpu\]' "$LOG_DIR/tp1gpu.log") runs; worst $(grep -o 'logit| [0-9.e-]*' "$LOG_DIR/tp1gpu.log" | awk '{print $2}' | sort -g | tail -1) ($(elapsed $t))"
fi
if want e2e; then
  t=$(date +%s)
  if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
      export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  # Every HTTP suite except test_http_hf_chat: that one checks whole chats against transformers'
  # fp32 greedy run of an f32 fixture, an oracle for the CPU reference path; the CUDA backend keeps
  # that fixture's matrices in bf16, which alone moves its logits 5-7% and so its greedy text.
  # Three times: the bf16 KV cache, then fp8 (--kv-dtype fp8 on every server and `run` of the
  # suite), then bf16 KV with a bf16 GDN state (--state-dtype bf16).
  for kv in bf16 fp8 bf16state; do
    SPARKSERVE_E2E_BACKEND=cuda SPARKSERVE_E2E_KV_DTYPE=${kv%state} SPARKSERVE_BUILD_DIR="$(dirname "$BIN")" \
      SPARKSERVE_E2E_STATE_DTYPE=$([ "$kv" = bf16state ] && echo bf16 || echo fp32) \
      SPARKSERVE_E2E_LOG_DIR="$LOG_DIR/e2e_servers_$kv" python3 -m pytest -q -p no:cacheprovider \
      tests/e2e/test_http_openai.py tests/e2e/test_http_anthropic.py tests/e2e/test_http_operations.py \
      tests/e2e/test_http_tool_choice.py tests/e2e/test_structured_output.py 2>&1 | tee "$LOG_DIR/e2e_$kv.log"
    rc=${PIPESTATUS[0]}
    record "e2e-$kv" "$rc" "$(grep -E '[0-9]+ (passed|failed)' "$LOG_DIR/e2e_$kv.log" | tail -1) ($(elapsed $t))"
  done
fi
M4B=/tmp/sparkserve_4b_nvfp4
make_4b() {  # the random 4B nvfp4-mixed model with the real Qwen3 tokenizer (made once)
  if [ ! -f "$M4B/config.json" ]; then
    "$BIN/sparkserve" demo-model "$M4B" --shape 4b --recipe nvfp4-mixed 2>&1 | tail -3
    cp ../shared/fixtures/qwen3-tokenizer/tokenizer.json ../shared/fixtures/qwen3-tokenizer/tokenizer_config.json "$M4B/" &&
      cp ../shared/fixtures/qwen3_5-chat_template.jinja "$M4B/chat_template.jinja"
  fi
}
if want structured; then
  t=$(date +%s)
  make_4b
  # Arrays of short strings with 512 items at least: no output can end before max_tokens, so the
  # constrained runs generate as many tokens as the free ones (completions: no reasoning gate).
  SCHEMA='{"response_format":{"type":"json_schema","json_schema":{"name":"bench","schema":{"type":"array","items":{"type":"string","maxLength":16},"minItems":512}}}}'
  serve_bench struct-free-b1 "$M4B" 8 4096 128 256 8 1
  BENCH_EXTRA_BODY="$SCHEMA" serve_bench struct-json-b1 "$M4B" 8 4096 128 256 8 1
  serve_bench struct-free-64 "$M4B" 64 2048 1024 128 128 64
  BENCH_EXTRA_BODY="$SCHEMA" serve_bench struct-json-64 "$M4B" 64 2048 1024 128 128 64
  for n in b1 64; do
    free=$(grep -i 'output token throughput' "$LOG_DIR/bench_struct-free-$n.log" | head -1 | grep -Eo '[0-9]+(\.[0-9]+)?' | head -1)
    json=$(grep -i 'output token throughput' "$LOG_DIR/bench_struct-json-$n.log" | head -1 | grep -Eo '[0-9]+(\.[0-9]+)?' | head -1)
    echo "structured $n: constrained $json tok/s vs free $free tok/s ($(awk -v a="$json" -v b="$free" 'BEGIN {if (b > 0) printf "%.1f%%", 100 * a / b}') )"
  done
  grep -h "constraint" "$LOG_DIR"/struct-json-*.err | tail -4
  echo "structured section: $(elapsed $t)"
fi
# The speculative-decoding e2e suite against `serve --backend cuda` with drafter $1, recorded as $2.
spec_e2e() {
  SPARKSERVE_E2E_BACKEND=cuda SPARKSERVE_E2E_SPEC_DRAFTERS=$1 SPARKSERVE_BUILD_DIR="$(dirname "$BIN")" \
    SPARKSERVE_E2E_LOG_DIR="$LOG_DIR/e2e_servers_$2" python3 -m pytest -q -p no:cacheprovider \
    tests/e2e/test_spec_decode.py 2>&1 | tee "$LOG_DIR/$2.log"
  record "$2" "${PIPESTATUS[0]}" "$(grep -E '[0-9]+ (passed|failed)' "$LOG_DIR/$2.log" | tail -1) ($(elapsed $t))"
}
# `bench serve` of the random 4B at 1, 8 and 64 users with --spec $1 against --spec off (run once).
spec_serve() {
  for users in 1 8 64; do
    batch=$(( users < 8 ? 8 : users ))
    [ -f "$LOG_DIR/bench_spec-off-$users.log" ] ||
      serve_bench "spec-off-$users" "$M4B" "$batch" 2048 512 128 $(( users * 4 )) "$users" --spec off
    serve_bench "spec-$1-$users" "$M4B" "$batch" 2048 512 128 $(( users * 4 )) "$users" --spec "$1"
    off=$(grep -i 'output token throughput' "$LOG_DIR/bench_spec-off-$users.log" | head -1 | grep -Eo '[0-9]+(\.[0-9]+)?' | head -1)
    on=$(grep -i 'output token throughput' "$LOG_DIR/bench_spec-$1-$users.log" | head -1 | grep -Eo '[0-9]+(\.[0-9]+)?' | head -1)
    echo "spec $users users: $1 $on tok/s vs off $off tok/s"
    grep -A3 "Speculative Decoding" "$LOG_DIR/bench_spec-$1-$users.log" | head -4
  done
}
if want spec; then
  t=$(date +%s)
  spec_e2e ngram e2e-spec
  make_4b
  # The step cost curve (one sequence of 1..256 tokens a step): verify 1+3 at batch 1 = the 4-token
  # row against the 1-token row.
  "$BIN/sparkserve" bench engine "$M4B" --spec ngram --batch 1,8 --context 0 --steps 32 --repeats 3 \
    2>&1 | tee "$LOG_DIR/bench_engine_spec.log"
  record spec-curve "${PIPESTATUS[0]}" "$(awk '$1=="4" && NF==4 {print "4 tokens: " $4 "x one token"}' "$LOG_DIR/bench_engine_spec.log")"
  spec_serve ngram
  echo "spec section: $(elapsed $t)"
fi
if want mtp; then
  t=$(date +%s)
  "$BIN/gpu_model_test" --gtest_brief=1 --gtest_filter='CudaMtpVsCpu.*' 2>&1 | tee "$LOG_DIR/mtp_model.log"
  rc=${PIPESTATUS[0]}
  record mtp-model "$rc" "$(grep -c '^\[mtp\]' "$LOG_DIR/mtp_model.log") runs; worst $(grep -o 'logit| [0-9.e-]*' "$LOG_DIR/mtp_model.log" | awk '{print $2}' | sort -g | tail -1) ($(elapsed $t))"
  spec_e2e mtp e2e-mtp
  make_4b
  "$BIN/sparkserve" bench engine "$M4B" --spec mtp --batch 1,8 --context 0 --steps 32 --repeats 3 \
    2>&1 | tee "$LOG_DIR/bench_engine_mtp.log"
  record mtp-curve "${PIPESTATUS[0]}" "$(awk '$1=="4" && NF==4 {print "4 tokens: " $4 "x one token"}' "$LOG_DIR/bench_engine_mtp.log"); $(grep -o 'one MTP draft step[^)]*' "$LOG_DIR/bench_engine_mtp.log" | head -1)"
  # A draft head of the 32K lowest ids (--draft-vocab): the MTP draft step against the whole lm_head's.
  "$BIN/sparkserve" bench engine "$M4B" --spec mtp --draft-vocab 32768 --batch 1 --context 0 --steps 32 --repeats 3 \
    2>&1 | tee "$LOG_DIR/bench_engine_mtp_dv.log"
  record mtp-draft-vocab "${PIPESTATUS[0]}" "$(grep -o 'one MTP draft step[^)]*' "$LOG_DIR/bench_engine_mtp_dv.log" | head -1)"
  [ -n "${MTP_SKIP_SERVE:-}" ] || spec_serve mtp
  echo "mtp section: $(elapsed $t)"
fi
if want prefix; then
  t=$(date +%s)
  SPARKSERVE_E2E_BACKEND=cuda SPARKSERVE_BUILD_DIR="$(dirname "$BIN")" SPARKSERVE_E2E_LOG_DIR="$LOG_DIR/e2e_servers_prefix" \
    python3 -m pytest -q -p no:cacheprovider tests/e2e/test_prefix_cache.py 2>&1 | tee "$LOG_DIR/e2e_prefix.log"
  rc=${PIPESTATUS[0]}
  record e2e-prefix "$rc" "$(grep -E '[0-9]+ (passed|failed)' "$LOG_DIR/e2e_prefix.log" | tail -1) ($(elapsed $t))"
  make_4b
  urls=()
  pids=()
  for mode in cached cold; do
    flags=(); [ $mode = cold ] && flags=(--no-prefix-cache)
    "$BIN/sparkserve" serve "$M4B" --backend cuda --port 0 --max-batch 8 --max-seq-len 8192 --spec off "${flags[@]}" \
      >"$LOG_DIR/prefix_$mode.out" 2>"$LOG_DIR/prefix_$mode.err" &
    pids+=($!)
    url=""
    for _ in $(seq 1 600); do
      url=$(sed -n 's/^listening on //p' "$LOG_DIR/prefix_$mode.out")
      [ -n "$url" ] && curl -sf "$url/health" >/dev/null && break
      sleep 0.5
    done
    urls+=("$url")
  done
  timeout 900 python3 tests/gpu/prefix_ttft.py "${urls[0]}" "${urls[1]}" 2>&1 | tee "$LOG_DIR/prefix_ttft.log"
  rc=${PIPESTATUS[0]}
  record prefix-4b "$rc" "$(grep '^prefix next-turn' "$LOG_DIR/prefix_ttft.log")"
  for pid in "${pids[@]}"; do kill -TERM "$pid"; wait "$pid"; done
fi
if want 4b; then
  t=$(date +%s)
  make_4b
  echo "4B model ready ($(elapsed $t))"
  if [ -x "$BIN/gpu_model_test" ]; then
    SPARKSERVE_GPU_MODELS="$M4B" "$BIN/gpu_model_test" --gtest_brief=1 --gtest_filter='*extra0_graphs:*extra0_fp8kv*:*extra0_bf16state*' 2>&1 | tee "$LOG_DIR/model_4b.log"
    rc=${PIPESTATUS[0]}
    record model-4b "$rc" "$(grep '^\[model\]' "$LOG_DIR/model_4b.log" | sed 's/.*graphs=1//' | tr '\n' ';')"
  else  # a bundle split to fit what one call carries
    SUMMARY+=("$(printf '%-10s %-5s %s' model-4b NOT-RUN "no gpu_model_test in $BIN")")
  fi
  "$BIN/sparkserve" bench engine "$M4B" --batch "${BENCH_BATCH:-1,8}" --context "${BENCH_CONTEXT:-0,8192}" \
    --steps 64 --repeats 3 ${BENCH_PROFILE:+--profile} ${BENCH_PROMPT:+--prompt-len $BENCH_PROMPT} --json "$LOG_DIR/bench_engine.json" 2>&1 | tee "$LOG_DIR/bench_engine.log"
  record engine "${PIPESTATUS[0]}" "$(awk '$1=="1" && $2=="0" {print "batch 1: " $3 " tok/s, " $7 " of floor"}' "$LOG_DIR/bench_engine.log")"
  # Many sequences at 1K context (aggregate decode: the GEMM path past 8 rows), then the prefill of
  # one fresh prompt (tok/s, time to first token).
  "$BIN/sparkserve" bench engine "$M4B" --batch "${BENCH_WIDE_BATCH:-64}" --context 1024 --steps 32 --repeats 3 \
    ${BENCH_PROFILE:+--profile} --json "$LOG_DIR/bench_engine_wide.json" 2>&1 | tee "$LOG_DIR/bench_engine_wide.log"
  record engine-wide "${PIPESTATUS[0]}" "$(awk '$2=="1024" {print "batch " $1 ": " $3 " tok/s, " $7 " of floor"}' "$LOG_DIR/bench_engine_wide.log" | head -1)"
  # The same with a bf16 GDN state (half the state bytes), alone and with the fp8 KV cache.
  for dtypes in "--state-dtype bf16" "--state-dtype bf16 --kv-dtype fp8"; do
    name=$(echo "$dtypes" | tr -d '-' | tr ' ' '_')
    "$BIN/sparkserve" bench engine "$M4B" $dtypes --batch "${BENCH_WIDE_BATCH:-64}" --context 1024 --steps 32 --repeats 3 \
      --json "$LOG_DIR/bench_engine_wide_$name.json" 2>&1 | tee "$LOG_DIR/bench_engine_wide_$name.log"
    record "wide ${dtypes//--/}" "${PIPESTATUS[0]}" "$(awk '$2=="1024" {print "batch " $1 ": " $3 " tok/s, " $7 " of floor"}' "$LOG_DIR/bench_engine_wide_$name.log" | head -1)"
  done
  "$BIN/sparkserve" bench engine "$M4B" --batch 1 --context 0 --prompt-len "${BENCH_PREFILL:-512,4096}" --steps 8 --repeats 3 \
    ${BENCH_PROFILE:+--profile} --json "$LOG_DIR/bench_engine_prefill.json" 2>&1 | tee "$LOG_DIR/bench_engine_prefill.log"
  record prefill "${PIPESTATUS[0]}" "$(awk '$2=="4096" && NF==4 {print "4096 tokens: " $3 " tok/s, TTFT " $4 " ms"}' "$LOG_DIR/bench_engine_prefill.log")"
  # The fp8 KV cache at long context (half the KV bytes a token).
  "$BIN/sparkserve" bench engine "$M4B" --kv-dtype fp8 --batch "${BENCH_BATCH:-1,8}" --context 8192 --steps 64 --repeats 3 \
    --json "$LOG_DIR/bench_engine_fp8.json" 2>&1 | tee "$LOG_DIR/bench_engine_fp8.log"
  record engine-fp8 "${PIPESTATUS[0]}" "$(awk '$1=="1" && $2=="8192" {print "batch 1 at 8K: " $3 " tok/s, " $7 " of floor"}' "$LOG_DIR/bench_engine_fp8.log")"
  # The server at batch 1 (one streaming request at a time), then 64 users at once (1024 in / 128
  # out: prefill chunks and decodes share steps).
  serve_bench serve-b1 "$M4B" 8 4096 128 256 8 1
  serve_bench serve-64 "$M4B" 64 2048 1024 128 128 64
  serve_bench serve-64-bf16-state "$M4B" 64 2048 1024 128 128 64 --state-dtype bf16
  echo "4b section: $(elapsed $t)"
fi

if want tp; then
  t=$(date +%s)
  TP_DIR="$LOG_DIR/tp"
  mkdir -p "$TP_DIR"
  printf 'gpu-suite-tp-token\n' >"$TP_DIR/token" && chmod 600 "$TP_DIR/token"
  "$BIN/sparkserve-node" --host 127.0.0.1 --port 0 --device 0 --cache-dir "$TP_DIR/cache" \
    --token-file "$TP_DIR/token" 2>"$TP_DIR/node.log" &
  tp_node_pid=$!
  tp_node=""
  for _ in $(seq 1 100); do
    tp_node=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$TP_DIR/node.log" | head -1 | sed 's/listening on //')
    [ -n "$tp_node" ] && break
    sleep 0.2
  done
  TP_FLAGS=(--nodes "$tp_node" --token-file "$TP_DIR/token" --collective gloo)
  tp_ids=3,17,250,9,88,201,5,5,130,64,7,300
  tp_rc=0; tp_detail=""
  for recipe in nvfp4-mixed nvfp4 fp8 bf16; do
    m="$TP_DIR/demo_$recipe"
    [ -f "$m/config.json" ] || "$BIN/sparkserve" demo-model "$m" --shape tiny --recipe "$recipe" --seed 7 --quiet
    for tp in 1 2; do
      flags=(); [ $tp = 2 ] && flags=("${TP_FLAGS[@]}")
      timeout 300 "$BIN/sparkserve" run "$m" --backend cuda --ids "$tp_ids" --max-new 32 --ignore-eos --json \
        "${flags[@]}" >"$TP_DIR/run_${recipe}_tp$tp.json" 2>>"$TP_DIR/run.log" || tp_rc=1
      timeout 300 "$BIN/sparkserve" score "$m" --backend cuda --ids "$tp_ids" --out "$TP_DIR/score_${recipe}_tp$tp.npy" \
        "${flags[@]}" 2>>"$TP_DIR/run.log" || tp_rc=1
    done
    # Greedy ids equal; logits within the GPU tolerance (2e-2 of the largest |logit|, as gpu_model_test).
    line=$(python3 tests/gpu/tp_compare.py "$TP_DIR/run_${recipe}_tp1.json" "$TP_DIR/run_${recipe}_tp2.json" \
      "$TP_DIR/score_${recipe}_tp1.npy" "$TP_DIR/score_${recipe}_tp2.npy" 2e-2) || tp_rc=1
    echo "tp $recipe: $line" | tee -a "$TP_DIR/compare.log"
    tp_detail+="$recipe ${line%%;*}; "
  done
  record tp "$tp_rc" "$tp_detail($(elapsed $t))"
  # Per-step cost of the second rank: `bench engine` TP=1 against TP=2 on the same model.
  m="$TP_DIR/demo_nvfp4-mixed"
  for tp in 1 2; do
    flags=(); [ $tp = 2 ] && flags=("${TP_FLAGS[@]}")
    timeout 300 "$BIN/sparkserve" bench engine "$m" --backend cuda --batch 1,8 --context 0 --steps 64 --repeats 3 \
      "${flags[@]}" --json "$TP_DIR/bench_engine_tp$tp.json" 2>&1 | tee "$TP_DIR/bench_engine_tp$tp.log"
    rc=${PIPESTATUS[0]}
    record "tp-engine$tp" "$rc" "$(awk '$1=="1" && $2=="0" {print "batch 1: " $3 " tok/s"} $1=="8" && $2=="0" {print "batch 8: " $3 " tok/s"}' "$TP_DIR/bench_engine_tp$tp.log" | tr '\n' ' ')"
  done
  # `bench serve` through a TP=2 server, then the HTTP e2e suite against one.
  serve_bench tp-serve "$m" 8 1024 128 64 32 8 "${TP_FLAGS[@]}"
  SPARKSERVE_E2E_BACKEND=cuda SPARKSERVE_E2E_NODES=1 SPARKSERVE_E2E_COLLECTIVE=gloo SPARKSERVE_BUILD_DIR="$(dirname "$BIN")" \
    SPARKSERVE_E2E_LOG_DIR="$LOG_DIR/e2e_servers_tp" timeout 900 python3 -m pytest -q -p no:cacheprovider \
    tests/e2e/test_http_openai.py tests/e2e/test_http_anthropic.py 2>&1 | tee "$LOG_DIR/e2e_tp.log"
  rc=${PIPESTATUS[0]}
  record e2e-tp2 "$rc" "$(grep -E '[0-9]+ (passed|failed)' "$LOG_DIR/e2e_tp.log" | tail -1)"
  # --collective nccl with head and node on this one GPU: NCCL refuses two ranks on one device, and
  # start-up must stop at once with its message (a set-up error is not retried until a deadline).
  t_n=$(date +%s)
  timeout 120 "$BIN/sparkserve" run "$m" --backend cuda --ids "$tp_ids" --max-new 4 --nodes "$tp_node" \
    --token-file "$TP_DIR/token" --collective nccl >"$TP_DIR/nccl_one_gpu.json" 2>"$TP_DIR/nccl_one_gpu.log"
  rc=$?; secs=$(( $(date +%s) - t_n ))
  why=$(grep -o -i -E 'duplicate gpu[^;"]*|invalid usage[^;"]*|no nccl[^;"]*' "$TP_DIR/nccl_one_gpu.log" | head -1)
  nccl_rc=1; [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -n "$why" ] && [ $secs -lt 60 ] && nccl_rc=0
  record tp-nccl-1gpu $nccl_rc "run exit $rc after ${secs} s: ${why:-$(tail -1 "$TP_DIR/nccl_one_gpu.log" | cut -c1-160)}"
  kill -TERM "$tp_node_pid"; wait "$tp_node_pid"
  # Start-up figures on this host's CPUs with the random 4B (when the 4b section made it): bytes
  # shipped and time to healthy, first start (empty node cache) and second start.
  if [ -f /tmp/sparkserve_4b_nvfp4/config.json ]; then
    timeout 900 bench/tp_start.sh /tmp/sparkserve_4b_nvfp4 1 "$BIN" -- --backend cpu --max-batch 1 --max-seq-len 256 --spec off \
      2>&1 | tee "$TP_DIR/start_4b_cpu.log"
    record tp-start-4b "${PIPESTATUS[0]}" "$(grep '^start' "$TP_DIR/start_4b_cpu.log" | sed 's/ (TP.*//' | tr '\n' ';')"
  fi
  echo "tp section: $(elapsed $t)"
fi
if want gguf; then
  t=$(date +%s)
  if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
      export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  M4B_BF16=/tmp/sparkserve_4b_bf16
  GGUF4B=/tmp/sparkserve_4b_q4_k_m.gguf
  if [ ! -f "$GGUF4B" ]; then
    [ -f "$M4B_BF16/config.json" ] || "$BIN/sparkserve" demo-model "$M4B_BF16" --shape 4b --recipe bf16 2>&1 | tail -1
    cp ../shared/fixtures/qwen3-tokenizer/tokenizer.json ../shared/fixtures/qwen3-tokenizer/tokenizer_config.json "$M4B_BF16/"
    python3 tests/e2e/gguf_convert.py convert "$M4B_BF16" "$GGUF4B" --type q4_k_m 2>&1 | tail -3
  fi
  "$BIN/sparkserve" run "$GGUF4B" --backend cuda --ids 1,2,3,4 --max-new 16 --json 2>&1 | tee "$LOG_DIR/gguf_run.log"
  record gguf-run "${PIPESTATUS[0]}" "$(tail -1 "$LOG_DIR/gguf_run.log" | cut -c1-80)"
  make_4b
  for v in "bf16:" "requant:--requantize nvfp4-mixed" "nvfp4-mixed-dir:"; do
    name=${v%%:*}; flags=${v#*:}; model="$GGUF4B"
    [ "$name" = nvfp4-mixed-dir ] && model="$M4B"
    "$BIN/sparkserve" bench engine "$model" $flags --batch 1,8 --context 0 --steps 64 --repeats 3 \
      --json "$LOG_DIR/bench_engine_gguf_$name.json" 2>&1 | tee "$LOG_DIR/bench_engine_gguf_$name.log"
    record "gguf-$name" "${PIPESTATUS[0]}" "$(awk '$1=="1" && $2=="0" {print "batch 1: " $3 " tok/s"}' "$LOG_DIR/bench_engine_gguf_$name.log")"
  done
  echo "gguf section: $(elapsed $t)"
fi

if want tp2; then
  t=$(date +%s)
  TP2_DIR="$LOG_DIR/tp2"
  mkdir -p "$TP2_DIR"
  if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then
    record tp2 1 "needs two GPUs (nvidia-smi lists $(nvidia-smi -L | wc -l))"
  else
    printf 'gpu-suite-tp2-token\n' >"$TP2_DIR/token" && chmod 600 "$TP2_DIR/token"
    "$BIN/sparkserve-node" --host 127.0.0.1 --port 0 --device 1 --cache-dir "$TP2_DIR/cache" \
      --token-file "$TP2_DIR/token" 2>"$TP2_DIR/node.log" &
    tp2_node_pid=$!
    tp2_node=""
    for _ in $(seq 1 100); do
      tp2_node=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$TP2_DIR/node.log" | head -1 | sed 's/listening on //')
      [ -n "$tp2_node" ] && break
      sleep 0.2
    done
    NCCL_FLAGS=(--nodes "$tp2_node" --token-file "$TP2_DIR/token" --collective nccl)
    tp_ids=3,17,250,9,88,201,5,5,130,64,7,300
    tp2_rc=0; tp2_detail=""
    for recipe in nvfp4-mixed fp8; do
      m="$TP2_DIR/demo_$recipe"
      [ -f "$m/config.json" ] || "$BIN/sparkserve" demo-model "$m" --shape tiny --recipe "$recipe" --seed 7 --quiet
      for tp in 1 2; do
        flags=(); [ $tp = 2 ] && flags=("${NCCL_FLAGS[@]}")
        timeout 300 "$BIN/sparkserve" run "$m" --backend cuda --ids "$tp_ids" --max-new 32 --ignore-eos --json \
          "${flags[@]}" >"$TP2_DIR/run_${recipe}_tp$tp.json" 2>>"$TP2_DIR/run.log" || tp2_rc=1
        timeout 300 "$BIN/sparkserve" score "$m" --backend cuda --ids "$tp_ids" \
          --out "$TP2_DIR/score_${recipe}_tp$tp.npy" "${flags[@]}" 2>>"$TP2_DIR/run.log" || tp2_rc=1
      done
      line=$(python3 tests/gpu/tp_compare.py "$TP2_DIR/run_${recipe}_tp1.json" "$TP2_DIR/run_${recipe}_tp2.json" \
        "$TP2_DIR/score_${recipe}_tp1.npy" "$TP2_DIR/score_${recipe}_tp2.npy" 2e-2) || tp2_rc=1
      tp2_detail+="$recipe ${line%%;*}; "
    done
    record tp2-nccl "$tp2_rc" "$tp2_detail"
    m="$TP2_DIR/demo_nvfp4-mixed"
    timeout 300 "$BIN/sparkserve" bench engine "$m" --backend cuda --batch 1,8 --context 0 --steps 64 --repeats 3 \
      "${NCCL_FLAGS[@]}" 2>&1 | tee "$TP2_DIR/bench_engine_tp2.log"
    record tp2-engine "${PIPESTATUS[0]}" "$(awk '$1=="1" && $2=="0" {print "batch 1: " $3 " tok/s"} $1=="8" && $2=="0" {print "batch 8: " $3 " tok/s"}' "$TP2_DIR/bench_engine_tp2.log" | tr '\n' ' ')"
    timeout 120 "$BIN/sparkserve" cluster-check "${NCCL_FLAGS[@]}" 2>&1 | tee "$TP2_DIR/cluster_check.log"
    record tp2-cluster-check "${PIPESTATUS[0]}" "$(grep -E '^(16 MB|8 KB)' "$TP2_DIR/cluster_check.log" | awk '{print $1 $2 " " $3 " us " $6 " GB/s"}' | tr '\n' ';')"
    kill -TERM "$tp2_node_pid"; wait "$tp2_node_pid"
  fi
  echo "tp2 section: $(elapsed $t)"
fi

echo
echo "== failures =="
for f in ops blackwell model e2e_bf16 e2e_fp8 e2e_bf16state e2e_spec model_4b e2e_tp; do
  [ -f "$LOG_DIR/$f.log" ] && grep -E -A12 "Failure$|^FAILED|Error:" "$LOG_DIR/$f.log" | head -60
done
for kv in bf16 fp8 bf16state; do
  if [ -d "$LOG_DIR/e2e_servers_$kv" ] && grep -q FAILED "$LOG_DIR/e2e_$kv.log"; then  # what the servers said
    for f in $(grep -l -i -E "\[error\]|\[warning\]|signal" "$LOG_DIR"/e2e_servers_$kv/*.log 2>/dev/null | head -4); do
      echo "-- $f"; grep -i -E "\[error\]|\[warning\]|signal|stopped" "$f" | tail -n 6
    done
  fi
done
[ -f "$LOG_DIR/kernel_check.log" ] && sed -n "/^kernel  *us/,\$p" "$LOG_DIR/kernel_check.log"
[ -f "$LOG_DIR/bench_engine.log" ] && grep -v '\[info\]' "$LOG_DIR/bench_engine.log"
[ -f "$LOG_DIR/bench_engine_spec.log" ] && grep -v '\[info\]' "$LOG_DIR/bench_engine_spec.log"
[ -f "$LOG_DIR/bench_engine_fp8.log" ] && grep -v '\[info\]' "$LOG_DIR/bench_engine_fp8.log"
[ -f "$LOG_DIR/bench_engine_wide.log" ] && grep -v '\[info\]' "$LOG_DIR/bench_engine_wide.log"
for f in "$LOG_DIR"/bench_engine_wide_*.log; do [ -f "$f" ] && { echo "-- $(basename "$f")"; grep -v '\[info\]' "$f" | tail -2; }; done
[ -f "$LOG_DIR/tp/compare.log" ] && { echo "-- tp"; cat "$LOG_DIR/tp/compare.log"; grep -i -E "\[error\]" "$LOG_DIR/tp/node.log" "$LOG_DIR/tp/run.log" | tail -n 8; }
[ -f "$LOG_DIR/bench_engine_prefill.log" ] && grep -v '\[info\]' "$LOG_DIR/bench_engine_prefill.log"
# The summary last: a caller that keeps only the tail of the output keeps it.
echo "== gpu suite summary =="
printf '%s\n' "${SUMMARY[@]}"
echo "gpu suite: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
