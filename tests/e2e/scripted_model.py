"""A scripted tiny Qwen3.5 checkpoint: a real model directory whose greedy output is a chain of text
pieces chosen here, so the agent-loop tests can get real tool calls and reasoning out of
`sparkserve serve` (the golden random models never write a tool call).

How it works. The checkpoint has the shapes of tests/golden/qwen35/text_untied (hidden 64, untied
lm_head) but every mixer and MLP writes zero (self_attn.o_proj, linear_attn.out_proj and
mlp.down_proj are zero), so each layer passes its input through and the final hidden state is the
final-normed embedding of the CURRENT token: the greedy next token is a function of the current
token alone, a bigram table. The embeddings of the tokens the table uses are orthogonal with
rms 1, and lm_head row succ(t) holds C * embedding(t) / |embedding(t)| (other rows zero), so for a
scripted token t the logit of succ(t) is C * sqrt(hidden) and every other scripted row scores 0.

The tokenizer is a small byte-level BPE trained here plus non-special added tokens, one per piece
of scripted output ("It is sunny in Paris.", "<parameter=city>\\nParis\\n</parameter>\\n", ...), so
no token id repeats within a chain (a bigram table cannot leave a loop). A chain starts at the LAST
token of the prompt the server renders; these differ by how the generation prompt ends (the ids are
found by rendering the real chat templates with the transformers-configured jinja2 oracle and
encoding with the `tokenizers` library):

  THINKING_ON   thinking on (the default). Qwen3.5 ends the prompt with "<think>\\n", Qwen3 with
                "<|im_start|>assistant\\n" (the model opens <think> itself):
                  [<think>] REASONING </think> "\\n\\n" ANSWER <|im_end|>
  THINKING_OFF  enable_thinking=false: the prompt ends "<think>\\n\\n</think>\\n\\n":
                  a tool call of get_weather(city="Paris") and nothing else, then <|im_end|>
  TOOL_FORCED   tool_choice required / Anthropic "any": the server appends "<tool_call>\\n":
                  the rest of a call of get_time(city="Paris"), then <|im_end|>

Family "qwen3_5" writes calls in the Qwen3.5 XML form with ../shared/fixtures'
qwen3_5-chat_template.jinja (serve with --output-parser qwen3_5); family "qwen3" writes the Qwen3
JSON form with the Qwen3 template from ../shared/fixtures/qwen3-tokenizer (--output-parser qwen3).
"""
import json
import os
import random
import struct
from dataclasses import dataclass, field

import numpy as np
from safetensors.numpy import save_file

import jinja_hf_oracle

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "..", "shared", "fixtures")
SHAPES_FROM = os.path.join(REPO, "tests", "golden", "qwen35", "text_untied")

VOCAB = 512
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]
NOT_SPECIAL = {"<think>", "</think>", "<tool_call>", "</tool_call>"}  # as in the Qwen tokenizers
LOGIT_SCALE = 4.0  # C above: the scripted logit is C * sqrt(64) = 32, every other scripted row 0

REASONING = "The user wants the weather in Paris."
ANSWER = "It is sunny in Paris."
CITY = "Paris"
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
]
# The generation-prompt endings (what the model continues from) the chains start at.
THINKING_ON, THINKING_OFF, TOOL_FORCED = "thinking_on", "thinking_off", "tool_forced"
# Added tokens that make those endings single, distinct tokens.
PROMPT_END_TOKENS = ["<think>\n", "</think>\n\n", "<tool_call>\n"]


@dataclass
class Script:
    """What a scripted model directory answers, for the tests' expectations."""
    family: str
    model_dir: str
    output_parser: str
    # start (THINKING_ON, ...) -> the generated text up to (not including) <|im_end|>
    texts: dict = field(default_factory=dict)
    # start -> (function name, arguments) of the call it writes, or None
    calls: dict = field(default_factory=dict)
    # start -> token id of the prompt's last token the chain is keyed on
    start_ids: dict = field(default_factory=dict)


def _pieces(family):
    """start -> the list of output pieces (each one token) before <|im_end|>."""
    if family == "qwen3_5":
        return {
            THINKING_ON: [REASONING, "</think>", "\n\n", ANSWER],
            THINKING_OFF: ["<tool_call>", "\n<function=get_weather>\n", f"<parameter=city>\n{CITY}\n</parameter>\n",
                           "</function>\n</tool_call>"],
            TOOL_FORCED: ["<function=get_time>\n", f"<parameter=city>\n{CITY}\n</parameter>\n",
                          "</function>\n</tool_call>"],
        }
    assert family == "qwen3", family
    return {
        THINKING_ON: ["<think>", REASONING, "</think>", "\n\n", ANSWER],
        THINKING_OFF: ["<tool_call>", '\n{"name": "get_weather", "arguments": {"city": "%s"}}\n' % CITY,
                       "</tool_call>"],
        TOOL_FORCED: ['{"name": "get_time", "arguments": {"city": "%s"}}\n' % CITY, "</tool_call>"],
    }


def _train_tokenizer(path, added):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    rng = random.Random(0)
    syll = ["ka", "to", "ri", "me", "su", "na", "lo", "pe", "vi", "da", "the", "and", "ing", "er", "on",
            "at", "weather", "Paris", "city", "time", "you", "are"]
    words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 3))) for _ in range(3000)]
    corpus = [" ".join(words[i:i + 12]) for i in range(0, len(words), 12)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(added), special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    assert tok.get_vocab_size() == VOCAB - len(added)
    tok.add_tokens([AddedToken(a, normalized=False, special=False) for a in added])
    assert tok.get_vocab_size() == VOCAB
    tok.save(path)
    j = json.load(open(path))
    for a in j["added_tokens"]:
        if a["content"] in NOT_SPECIAL:
            a["special"] = False
    json.dump(j, open(path, "w"), ensure_ascii=False)
    return Tokenizer.from_file(path)


def _write_template(d, family):
    json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None,
               "tokenizer_class": "Qwen2Tokenizer"}, open(os.path.join(d, "tokenizer_config.json"), "w"))
    if family == "qwen3_5":
        with open(os.path.join(FIXTURES, "qwen3_5-chat_template.jinja"), encoding="utf-8") as f:
            template = f.read()
        with open(os.path.join(d, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(template)
    else:
        with open(os.path.join(FIXTURES, "qwen3-tokenizer", "tokenizer_config.json"), encoding="utf-8") as f:
            template = json.load(f)["chat_template"]
        cfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
        cfg["chat_template"] = template
        json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"), ensure_ascii=False)


def _start_ids(d, tok):
    """The last prompt token the server hands the model, for each way a generation prompt ends."""
    request = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": TOOLS,
               "add_generation_prompt": True}

    def last_id(text):
        return tok.encode(text, add_special_tokens=False).ids[-1]

    on = jinja_hf_oracle.apply_chat_template(d, request)
    off = jinja_hf_oracle.apply_chat_template(d, {**request, "enable_thinking": False})
    # A forced call: the opening is encoded on its own and appended (head/http/tool_choice.h).
    return {THINKING_ON: last_id(on), THINKING_OFF: last_id(off), TOOL_FORCED: last_id("<tool_call>\n")}


def _safetensors_shapes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__"}


def _write_weights(d, table, scripted_ids, seed):
    """Random weights of text_untied's shapes, zero mixer/MLP outputs, the bigram `table` in lm_head."""
    rng = np.random.default_rng(seed)
    config = json.load(open(os.path.join(SHAPES_FROM, "config.json")))
    hidden = config["hidden_size"]
    tensors = {}
    for name, shape in _safetensors_shapes(os.path.join(SHAPES_FROM, "model.safetensors")).items():
        if name.startswith("mtp."):
            continue
        shape = [VOCAB if s == config["vocab_size"] else s for s in shape]
        if name.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight")) or name == "model.norm.weight":
            t = np.zeros(shape, np.float32)  # zero outputs; the final norm's (1 + w) scale is 1
        elif len(shape) == 1:
            t = 0.1 * rng.standard_normal(shape).astype(np.float32)
        else:
            t = 0.05 * rng.standard_normal(shape).astype(np.float32)
        tensors[name] = t
    ids = sorted(scripted_ids)
    assert len(ids) <= hidden, "the scripted tokens need orthogonal embeddings"
    embed = rng.standard_normal((VOCAB, hidden)).astype(np.float32)
    q, _ = np.linalg.qr(rng.standard_normal((hidden, len(ids))))
    for col, tid in enumerate(ids):
        embed[tid] = np.sqrt(hidden) * q[:, col]  # unit direction, rms 1
    head = np.zeros((VOCAB, hidden), np.float32)
    for t, nxt in table.items():
        head[nxt] += LOGIT_SCALE * embed[t] / np.linalg.norm(embed[t])
    tensors["model.embed_tokens.weight"] = embed
    tensors["lm_head.weight"] = head
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    return config


def write_scripted_model(d, family):
    """Writes the scripted model of `family` ("qwen3_5" or "qwen3") into directory `d`; returns its Script."""
    os.makedirs(d, exist_ok=True)
    pieces = _pieces(family)
    chain_tokens = sorted({p for chain in pieces.values() for p in chain} - set(SPECIALS))
    tok = _train_tokenizer(os.path.join(d, "tokenizer.json"), PROMPT_END_TOKENS + chain_tokens)
    _write_template(d, family)
    starts = _start_ids(d, tok)
    assert len(set(starts.values())) == 3, f"the prompt endings share a last token: {starts}"
    eos = tok.token_to_id("<|im_end|>")
    table = {}
    for start, chain in pieces.items():
        ids = [starts[start]] + [tok.token_to_id(p) for p in chain] + [eos]
        assert None not in ids, (family, start, chain)
        assert len(set(ids)) == len(ids), f"a token repeats in the {start} chain"
        for a, b in zip(ids, ids[1:]):
            assert table.get(a, b) == b, f"token {a} would need two successors"
            table[a] = b
    scripted = set(table) | set(table.values())
    config = _write_weights(d, table, scripted, seed=7 if family == "qwen3_5" else 8)
    config.update(vocab_size=VOCAB, mtp_num_hidden_layers=0, eos_token_id=eos)
    json.dump(config, open(os.path.join(d, "config.json"), "w"), indent=2)
    json.dump({"eos_token_id": [eos, tok.token_to_id("<|endoftext|>")]},
              open(os.path.join(d, "generation_config.json"), "w"))
    script = Script(family=family, model_dir=str(d), output_parser=family, start_ids=starts)
    for start, chain in pieces.items():
        script.texts[start] = "".join(chain)
    script.calls = {THINKING_ON: None, THINKING_OFF: ("get_weather", {"city": CITY}),
                    TOOL_FORCED: ("get_time", {"city": CITY})}
    return script
