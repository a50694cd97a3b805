"""Anthropic Messages API of `sparkserve serve` through the official `anthropic` SDK: messages,
streaming events, thinking on/off, stop sequences, count_tokens, and errors in Anthropic's shape."""
import anthropic
import httpx
import pytest
from tokenizers import Tokenizer

from conftest import API_KEY, MODEL_NAME

MSGS = [{"role": "user", "content": "hello world"}]


def test_message_and_stream_agree(anthropic_client):
    full = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=10, messages=MSGS, extra_body={"temperature": 0})
    assert full.type == "message" and full.role == "assistant" and full.model == MODEL_NAME
    assert full.id.startswith("msg_")
    assert full.stop_reason in ("end_turn", "max_tokens")
    assert full.usage.output_tokens <= 10
    text = "".join(b.text for b in full.content if b.type == "text")
    with anthropic_client.messages.stream(model=MODEL_NAME, max_tokens=10, messages=MSGS, extra_body={"temperature": 0}) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == text
    assert final.stop_reason == full.stop_reason
    assert final.usage.output_tokens == full.usage.output_tokens


def test_raw_stream_event_order(server):
    r = httpx.post(server.url + "/v1/messages", headers={"x-api-key": API_KEY},
                   json={"model": MODEL_NAME, "max_tokens": 5, "messages": MSGS, "stream": True, "temperature": 0})
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
    events = [line[7:] for line in r.text.split("\n") if line.startswith("event: ")]
    assert events[:2] == ["message_start", "ping"]
    assert events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == events.count("content_block_stop")


def test_thinking_enables_the_template_flag(server, anthropic_client, model_dir):
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    off = anthropic_client.messages.count_tokens(model=MODEL_NAME, messages=MSGS).input_tokens
    on = anthropic_client.messages.count_tokens(model=MODEL_NAME, messages=MSGS,
                                               thinking={"type": "enabled", "budget_tokens": 1024}).input_tokens
    # Thinking off renders an empty <think>\n\n</think>\n\n block; on leaves "<think>\n" open.
    h = {"x-api-key": API_KEY}
    ids_off = httpx.post(server.url + "/tokenize", headers=h, json={"messages": MSGS, "chat_template_kwargs": {"enable_thinking": False}}).json()["tokens"]
    ids_on = httpx.post(server.url + "/tokenize", headers=h, json={"messages": MSGS, "chat_template_kwargs": {"enable_thinking": True}}).json()["tokens"]
    assert (off, on) == (len(ids_off), len(ids_on))
    assert tok.decode(ids_on, skip_special_tokens=False).endswith("<think>\n")
    msg = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=6, messages=MSGS, extra_body={"temperature": 0},
                                           thinking={"type": "enabled", "budget_tokens": 1024})
    assert msg.usage.input_tokens == on
    assert msg.content == [] or msg.content[0].type in ("thinking", "text")


def test_stop_sequences(anthropic_client):
    base = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=16, messages=MSGS, extra_body={"temperature": 0})
    text = "".join(b.text for b in base.content if b.type == "text")
    assert len(text) >= 4, base
    stop = text[2:4]
    msg = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=16, messages=MSGS, extra_body={"temperature": 0},
                                           stop_sequences=[stop])
    assert msg.stop_reason == "stop_sequence" and msg.stop_sequence == stop
    assert "".join(b.text for b in msg.content if b.type == "text") == text[:text.find(stop)]


def test_errors_in_anthropic_shape(server, anthropic_client):
    bad = anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model=MODEL_NAME, max_tokens=5, messages=MSGS)
    with pytest.raises(anthropic.BadRequestError, match="unexpected role"):
        anthropic_client.messages.create(model=MODEL_NAME, max_tokens=5, messages=[{"role": "system", "content": "x"}])
    with pytest.raises(anthropic.BadRequestError, match="images are not supported yet"):
        anthropic_client.messages.create(model=MODEL_NAME, max_tokens=5, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}])
    r = httpx.post(server.url + "/v1/messages", headers={"x-api-key": API_KEY}, json={"model": MODEL_NAME, "messages": MSGS})
    assert r.status_code == 400
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in r.json()["error"]["message"]
