"""Acceptance tests of text/tokenizer against Hugging Face `tokenizers` (pinned in tests/requirements.txt):
token ids on >1 MB of generated multilingual text with the Qwen3 tokenizer and a Qwen3.5-regex copy,
decode round trips, streaming detokenisation, tokenizer.json variants (added-token flags, split
behaviours, GPT-2 ByteLevel, post-processor templates) and the CLI's errors. Bulk work goes through
`sparkserve tokenize --file` (one process per tokenizer).
"""
import copy
import json
import os
import random
import subprocess
import unicodedata

import pytest
from tokenizers import Tokenizer

import tokenizer_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURE = os.path.join(ROOT, "..", "shared", "fixtures", "qwen3-tokenizer", "tokenizer.json")
BUILD = os.environ.get("SPARKSERVE_BUILD_DIR", os.path.join(ROOT, "build"))
BIN = os.path.join(BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD), "bin", "sparkserve")
QWEN35_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Targeted strings: engine differences (\s vs U+180E), NFC edge cases (marks HF's tables predate),
# case-insensitive contractions, special-token neighbourhoods.
TARGETED = [
    "", " ", "a", "\u180e", " \u180e ", "a\u180e b", "x \u180e\u180e  y", "\u0085\u2028\u2029\u3000\u00a0 z",
    "e\u0301", "e\u0301\u0316", "a\u1ac1\u0316", "a\u0316\u1ac1", "a\U0001E4EC\u0316", "\U00011935\U00011930",
    "\U00011938", "a\u0898\u0300", "\u1100\u1161\u11a8", "\uac00\u11a8", "\u1112\u1175\u11c2\u0301",
    "Ǆ\u030c", "\u0344\u0301", "\u0F73\u0F71", "\u00c5\u030a", "\u212b", "\u1e9b\u0323",
    "IT'S 'S 'ſ 'K 'K 'LL 'Ll it’s", "<|im_start|>", "<|im_start|><|im_end|>", "a<|im_start|>b",
    "  <|im_start|>  user\n", "<|im_start|\u0301", "\u0301<|im_end|>", "e<|im_end|>\u0301", "<think>\n\n</think>\n\n",
    "\r\n\r\n  \r\n\t", "\n" * 40 + " " * 40 + "x", "   \t  \n  ", "1234567890 ١٢٣ ０１２",
    "👨‍👩‍👧‍👦🇺🇸🏴󠁧󠁢󠁳󠁣󠁴󠁿🧑🏽‍🚀",
    # long runs that a quadratic algorithm (utf8proc's mark reordering, regex backtracking) would stall on
    "e" + "\u0301\u0316\u031b" * 20000, " " * 100000 + "x", "\n \t" * 30000 + "y",
    # assigned after Unicode 14 (PCRE2 10.42's tables): CJK Ext H/I, Kawi, Nag Mundari, Garay, new symbols
    "字\U00031350\U00031351 \U0002EBF0x", "a\U00011F00\U00011F03b \U0001E4D0\U0001E4EC\U0001E4F1",
    "\u1c89\u1c8a \U00010D4A\U00010D69 \U0001CC00\U0001F6DC!", "\U00011F43\U00011F50 \u0897x\u0cf3", "\x00\x01\x1f\x7f", "a" * 3000, "中" * 2000, "é" * 1500 + "e\u0301" * 500,
]


def jsonl_lines(stdout):
    # Not splitlines(): JSON strings may hold U+2028, U+0085 etc. raw; records end with "\n" only.
    return stdout.decode().split("\n")[:-1]


def run_cli(*args, stdin=None):
    return subprocess.run([BIN, "tokenize", *args], input=stdin, capture_output=True, timeout=120)


def write_jsonl(path, items):
    with open(path, "w", encoding="utf-8") as f:
        for x in items:
            f.write(json.dumps(x, ensure_ascii=False) + "\n")


def encode_ours(tokenizer_path, texts, tmp_path, *flags):
    src = tmp_path / "texts.jsonl"
    write_jsonl(src, texts)
    r = run_cli(tokenizer_path, "--file", str(src), *flags)
    assert r.returncode == 0, r.stderr.decode()
    ids = [json.loads(line) for line in jsonl_lines(r.stdout)]
    assert len(ids) == len(texts)
    return ids


def decode_ours(tokenizer_path, id_lists, tmp_path, *flags):
    src = tmp_path / "ids.jsonl"
    write_jsonl(src, id_lists)
    r = run_cli(tokenizer_path, "--decode", "--file", str(src), *flags)
    assert r.returncode == 0, r.stderr.decode()
    out = [json.loads(line) for line in jsonl_lines(r.stdout)]
    assert len(out) == len(id_lists)
    return out


def first_difference(hf, text, ours, theirs):
    k = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    return (f"ids differ at token {k} of {len(theirs)}: ours {ours[max(0, k - 3):k + 4]} "
            f"{[hf.id_to_token(i) for i in ours[max(0, k - 3):k + 4]]} vs HF {theirs[max(0, k - 3):k + 4]} "
            f"{[hf.id_to_token(i) for i in theirs[max(0, k - 3):k + 4]]}; text near: "
            f"{hf.decode(theirs[max(0, k - 6):k + 6], skip_special_tokens=False)!r}")


def assert_same_ids(hf, texts, ours, add_special_tokens=True):
    theirs = [e.ids for e in hf.encode_batch(texts, add_special_tokens=add_special_tokens)]
    bad = [i for i in range(len(texts)) if ours[i] != theirs[i]]
    assert not bad, f"{len(bad)} of {len(texts)} texts differ; first: " + first_difference(
        hf, texts[bad[0]], ours[bad[0]], theirs[bad[0]])
    return theirs


@pytest.fixture(scope="module")
def corpus():
    docs = tokenizer_corpus.corpus()
    text = "".join(docs)
    assert len(text.encode("utf-8")) >= 1 << 20
    assert sum(1 for c in text if ord(c) > 127) >= 0.3 * len(text), "corpus must be >= 30% non-ASCII"
    return docs + TARGETED


@pytest.fixture(scope="module")
def qwen3_hf():
    return Tokenizer.from_file(FIXTURE)


@pytest.fixture(scope="module")
def qwen3_ids(corpus, tmp_path_factory):
    return encode_ours(FIXTURE, corpus, tmp_path_factory.mktemp("q3"))


def derived_tokenizer(tmp_path, mutate):
    with open(FIXTURE, encoding="utf-8") as f:
        t = json.load(f)
    mutate(t)
    d = tmp_path / "tok"
    d.mkdir()
    with open(d / "tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(t, f, ensure_ascii=False)
    return str(d), Tokenizer.from_file(str(d / "tokenizer.json"))


def test_qwen3_ids_equal_hf(corpus, qwen3_ids, qwen3_hf):
    assert_same_ids(qwen3_hf, corpus, qwen3_ids)


def test_qwen35_split_regex_ids_equal_hf(corpus, tmp_path):
    def use_qwen35_regex(t):
        split = t["pre_tokenizer"]["pretokenizers"][0]
        assert split["type"] == "Split"
        split["pattern"]["Regex"] = QWEN35_SPLIT
    path, hf = derived_tokenizer(tmp_path, use_qwen35_regex)
    assert_same_ids(hf, corpus, encode_ours(path, corpus, tmp_path))


def test_decode_of_encode_is_nfc(corpus, qwen3_ids, qwen3_hf, tmp_path):
    texts = decode_ours(FIXTURE, qwen3_ids, tmp_path)
    version_gaps = 0
    for doc, text in zip(corpus, texts):
        if text == unicodedata.normalize("NFC", doc):
            continue
        # Only where HF's normalizer tables predate Python's Unicode 14: then it is HF's NFC.
        hf_nfc = qwen3_hf.normalizer.normalize_str(doc)
        assert text == hf_nfc, f"decode(encode(x)) != NFC(x) for {doc[:80]!r}"
        version_gaps += 1
    assert version_gaps <= 6, "the corpus should mostly be Unicode-version neutral"


def random_id_sequences(hf, qwen3_ids, n, seed):
    """Random ids: single bytes that split characters (and make invalid sequences), special and
    unknown ids, whole-vocab draws, and slices of real encodings."""
    rng = random.Random(seed)
    vocab = hf.get_vocab()
    byte_ids = [vocab[c] for c in vocab if len(c) == 1]
    high = [i for i in byte_ids if hf.decode([i]) == "\ufffd"]  # bytes >= 0x80 alone
    specials = [i for i in range(151643, 151669)]
    seqs = []
    for _ in range(n):
        kind = rng.randrange(4)
        length = rng.randint(0, 40)
        if kind == 0:
            seq = [rng.choice(high if rng.random() < 0.7 else byte_ids) for _ in range(length)]
        elif kind == 1:
            seq = [rng.randrange(0, 151669) for _ in range(length)]
        elif kind == 2:
            doc = rng.choice(qwen3_ids)
            a = rng.randrange(0, max(1, len(doc)))
            seq = doc[a:a + length]
        else:
            pool = high + specials + [rng.randrange(0, 151643) for _ in range(20)] + [200000]
            seq = [rng.choice(pool) for _ in range(length)]
        seqs.append(seq)
    return seqs


@pytest.mark.parametrize("skip_special", [False, True])
def test_streaming_equals_whole_and_hf(qwen3_hf, qwen3_ids, tmp_path, skip_special):
    seqs = random_id_sequences(qwen3_hf, qwen3_ids, 1500, seed=7 + skip_special)
    flags = ["--skip-special-tokens"] if skip_special else []
    whole = decode_ours(FIXTURE, seqs, tmp_path, *flags)
    pieces = decode_ours(FIXTURE, seqs, tmp_path, "--stream", *flags)
    hf_text = qwen3_hf.decode_batch(seqs, skip_special_tokens=skip_special)
    assert any("\ufffd" in t for t in hf_text), "the sequences must include invalid UTF-8"
    for seq, w, p, h in zip(seqs, whole, pieces, hf_text):
        assert w == h, f"decode({seq}) = {w!r}, HF: {h!r}"
        assert len(p) == len(seq) + 1  # one piece per id, then Finish()
        assert "".join(p) == h, f"streamed {p} for {seq}, HF: {h!r}"


def test_added_token_flags_and_template(corpus, tmp_path):
    def mutate(t):
        flags = {
            "<|im_start|>": dict(lstrip=True),
            "<|im_end|>": dict(rstrip=True),
            "<think>": dict(single_word=True),
            "</think>": dict(normalized=True),
            "<tool_call>": dict(lstrip=True, rstrip=True),
        }
        for tok in t["added_tokens"]:
            tok.update(flags.get(tok["content"], {}))
        next_id = 151669
        for content, extra in [("é", dict(normalized=True)), ("ﬁx", dict(normalized=False)),
                               (" hello", dict(normalized=False, special=True)), ("wörld", dict(single_word=True)),
                               ("ab\u0301c", dict(normalized=True, special=False))]:
            tok = dict(id=next_id, content=content, single_word=False, lstrip=False, rstrip=False,
                       normalized=False, special=False)
            tok.update(extra)
            t["added_tokens"].append(tok)
            next_id += 1
        t["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "<|im_end|>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]},
                               "<|im_end|>": {"id": "<|im_end|>", "ids": [151645], "tokens": ["<|im_end|>"]}}}
    path, hf = derived_tokenizer(tmp_path, mutate)
    rng = random.Random(3)
    texts = TARGETED + corpus[:60]
    pieces = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "é", "e\u0301", "ﬁx", " hello",
              "hello", "wörld", "wo\u0308rld", "abćd", "ab\u0301c", "x", " ", "  ", "\n", "\t", "_", "9", "中"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 30))) for _ in range(600)]
    ours = encode_ours(path, texts, tmp_path)
    assert_same_ids(hf, texts, ours, add_special_tokens=True)
    raw = encode_ours(path, texts, tmp_path, "--no-add-special-tokens")
    theirs = assert_same_ids(hf, texts, raw, add_special_tokens=False)
    for skip in (False, True):
        flags = ["--skip-special-tokens"] if skip else []
        assert decode_ours(path, theirs, tmp_path, *flags) == hf.decode_batch(theirs, skip_special_tokens=skip)


def test_gpt2_style_byte_level_and_split_behaviours(corpus, tmp_path):
    texts = TARGETED + corpus[:80]

    def gpt2(t):
        t["normalizer"] = None
        t["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    path, hf = derived_tokenizer(tmp_path, gpt2)
    assert_same_ids(hf, texts, encode_ours(path, texts, tmp_path))

    def behaviours(t):
        t["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
        t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"\p{N}"}, "behavior": "MergedWithPrevious", "invert": False},
            {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
            {"type": "Split", "pattern": {"Regex": r"[,.;:]+"}, "behavior": "Contiguous", "invert": False},
            {"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": "Removed", "invert": False},
            {"type": "Split", "pattern": {"Regex": r"[\p{L}\p{M}]{1,4}"}, "behavior": "Removed", "invert": True},
            {"type": "Split", "pattern": {"Regex": r"x*"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    (tmp_path / "b").mkdir()
    path, hf = derived_tokenizer(tmp_path / "b", behaviours)
    assert_same_ids(hf, texts, encode_ours(path, texts, tmp_path))


def test_cli_prints_ids_and_json(qwen3_hf):
    text = "Hello wörld 👋 <|im_start|>user\n"
    expected = qwen3_hf.encode(text).ids
    r = run_cli(FIXTURE, "--", text)
    assert r.returncode == 0 and r.stderr == b""
    assert r.stdout.decode() == ",".join(map(str, expected)) + "\n"
    r = run_cli(os.path.dirname(FIXTURE), "--json", "--", text)
    assert r.returncode == 0
    assert json.loads(r.stdout) == {"ids": expected}
    r = run_cli(FIXTURE, "--", "-starts with a dash")
    assert r.stdout.decode().strip() == ",".join(map(str, qwen3_hf.encode("-starts with a dash").ids))


def test_cli_errors(tmp_path):
    r = run_cli(FIXTURE, "--", b"bad \xff byte")
    assert r.returncode == 1 and r.stdout == b""
    assert b"not valid UTF-8" in r.stderr and b"offset 4" in r.stderr
    r = run_cli(FIXTURE)
    assert r.returncode == 2 and r.stdout == b"" and b"TEXT" in r.stderr
    r = run_cli(FIXTURE, "--decode", "1,x")
    assert r.returncode == 2 and r.stdout == b"" and b"ids" in r.stderr
    r = run_cli(str(tmp_path / "missing"), "x")
    assert r.returncode == 1 and r.stdout == b"" and b"cannot open" in r.stderr
    for field, value, name in [("normalizer", {"type": "Lowercase"}, b"Lowercase"),
                               ("pre_tokenizer", {"type": "Metaspace", "replacement": "_"}, b"Metaspace"),
                               ("decoder", {"type": "WordPiece"}, b"WordPiece"),
                               ("model", {"type": "Unigram", "vocab": []}, b"Unigram")]:
        bad = tmp_path / field
        bad.mkdir()
        (bad / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                                                        "pre_tokenizer": {"type": "ByteLevel"},
                                                        "decoder": {"type": "ByteLevel"}, field: value}))
        r = run_cli(str(bad), "x")
        assert r.returncode == 1 and r.stdout == b""
        assert name in r.stderr, r.stderr
