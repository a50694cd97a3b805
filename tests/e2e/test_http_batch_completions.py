"""/v1/completions with a list of prompts (strings or token-id lists) through the official `openai`
SDK, as batch-evaluation clients send them: one choice per prompt times n, indexed
prompt_index * n + sample_index (as the OpenAI API and vLLM do), each the same text a one-prompt
request gets; usage summed; streaming, echo and logprobs per prompt; the limits answered with 400."""
import httpx
import openai
import pytest

from conftest import API_KEY, MODEL_NAME

PROMPTS = ["hello world", "kato rime suna", "the weather"]
GREEDY = dict(model=MODEL_NAME, max_tokens=6, temperature=0, extra_body={"ignore_eos": True})


def one(client, prompt, **kw):
    return client.completions.create(prompt=prompt, **{**GREEDY, **kw})


def test_text_prompts_one_choice_each_equal_to_single_requests(openai_client):
    singles = [one(openai_client, p) for p in PROMPTS]
    batch = one(openai_client, PROMPTS)
    assert [c.index for c in batch.choices] == [0, 1, 2]
    assert [c.text for c in batch.choices] == [s.choices[0].text for s in singles]
    assert [c.finish_reason for c in batch.choices] == ["length"] * 3
    assert batch.usage.prompt_tokens == sum(s.usage.prompt_tokens for s in singles)
    assert batch.usage.completion_tokens == 18
    assert batch.usage.total_tokens == batch.usage.prompt_tokens + 18


def test_token_id_prompts_and_n(openai_client, server):
    ids = [httpx.post(server.url + "/tokenize", json={"prompt": p}, headers={"x-api-key": API_KEY}).json()["tokens"]
           for p in PROMPTS[:2]]
    singles = [one(openai_client, i).choices[0].text for i in ids]
    batch = one(openai_client, ids, n=2)
    # index = prompt_index * n + sample_index; greedy samples of one prompt agree.
    assert [c.index for c in batch.choices] == [0, 1, 2, 3]
    assert [c.text for c in batch.choices] == [singles[0], singles[0], singles[1], singles[1]]
    assert batch.usage.prompt_tokens == len(ids[0]) + len(ids[1])


def test_streaming_indexes_chunks_per_prompt_and_sample(openai_client):
    whole = one(openai_client, PROMPTS, n=2)
    texts, finishes, usage = {}, {}, None
    for chunk in openai_client.completions.create(prompt=PROMPTS, n=2, stream=True,
                                                  stream_options={"include_usage": True}, **GREEDY):
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
        usage = chunk.usage or usage
    assert sorted(texts) == list(range(6))
    assert [texts[i] for i in range(6)] == [c.text for c in whole.choices]
    assert finishes == {i: "length" for i in range(6)}
    assert (usage.prompt_tokens, usage.completion_tokens) == (whole.usage.prompt_tokens, 36)


def test_echo_and_logprobs_are_per_prompt(openai_client):
    echo = one(openai_client, PROMPTS, echo=True)
    plain = one(openai_client, PROMPTS)
    assert [c.text for c in echo.choices] == [p + c.text for p, c in zip(PROMPTS, plain.choices)]
    lp = one(openai_client, PROMPTS, logprobs=2)
    for p, c in zip(PROMPTS, lp.choices):
        single = one(openai_client, p, logprobs=2).choices[0].logprobs
        assert c.logprobs.tokens == single.tokens and len(c.logprobs.tokens) == 6
        assert c.logprobs.token_logprobs == pytest.approx(single.token_logprobs, abs=1e-4)
        assert c.logprobs.text_offset == single.text_offset


def test_limits_and_malformed_lists_are_400(openai_client):
    with pytest.raises(openai.BadRequestError, match="at most 128 prompts"):
        one(openai_client, ["x"] * 129)
    with pytest.raises(openai.BadRequestError, match=r"prompts times n"):
        one(openai_client, ["x"] * 70, n=2)
    for bad in ([], ["x", [1, 2]], [[1, 2], []], [["x"]]):
        with pytest.raises(openai.BadRequestError, match="prompt"):
            one(openai_client, bad)
