"""The oracle for chat-template rendering: jinja2 configured exactly as Hugging Face transformers
configures it (utils/chat_template_utils.py: _compile_jinja_template / render_jinja_template, and
apply_chat_template's template selection and special-token variables).

Used by test_chat_template.py and test_jinja_engine.py; not a test file itself.
"""
import json
import os
from datetime import datetime
from functools import lru_cache

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

CONTINUE_FINAL_MESSAGE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
SPECIAL_TOKEN_ATTRIBUTES = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


class _GenerationTag(jinja2.ext.Extension):
    """HF's AssistantTracker with tracking off: {% generation %}...{% endgeneration %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # HF's override: no HTML escaping, key order kept, optional indent/separators.
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


_ENV = make_environment()


@lru_cache(maxsize=None)
def compile_template(source):
    return _ENV.from_string(source)


def load_model_dir(model_dir):
    """(templates, special_tokens) as transformers loads them: chat_template.jinja and
    additional_chat_templates/*.jinja win over tokenizer_config.json's chat_template."""
    config = {}
    path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    files = {}
    if os.path.exists(os.path.join(model_dir, "chat_template.jinja")):
        with open(os.path.join(model_dir, "chat_template.jinja"), encoding="utf-8") as f:
            files["default"] = f.read()
    extra_dir = os.path.join(model_dir, "additional_chat_templates")
    if os.path.isdir(extra_dir):
        for name in sorted(os.listdir(extra_dir)):
            if name.endswith(".jinja"):
                with open(os.path.join(extra_dir, name), encoding="utf-8") as f:
                    files[name[: -len(".jinja")]] = f.read()
    if len(files) == 1 and "default" in files:
        templates = files["default"]
    elif files:
        templates = files
    else:
        templates = config.get("chat_template")
        if isinstance(templates, (list, tuple)):
            templates = {t["name"]: t["template"] for t in templates}

    def token_text(t):
        return t.get("content") if isinstance(t, dict) else t

    special = {}
    for attr in SPECIAL_TOKEN_ATTRIBUTES:
        value = token_text(config.get(attr))
        if value:
            special[attr] = value
    extra = [token_text(t) for t in config.get("additional_special_tokens") or []]
    if extra:
        special["additional_special_tokens"] = extra
    return templates, special


def select_template(templates, tools, name=None):
    """transformers' get_chat_template."""
    if isinstance(templates, dict):
        if name is not None:
            return templates[name]
        if tools is not None and "tool_use" in templates:
            return templates["tool_use"]
        if "default" in templates:
            return templates["default"]
        raise ValueError("multiple chat templates and no default")
    return templates


def apply_chat_template(model_dir, request):
    """Renders a `sparkserve template` request file's content the way transformers'
    tokenizer.apply_chat_template(messages, tokenize=False, **rest) does."""
    request = dict(request)
    messages = request.pop("messages")
    tools = request.pop("tools", None)
    documents = request.pop("documents", None)
    add_generation_prompt = request.pop("add_generation_prompt", False)
    continue_final_message = request.pop("continue_final_message", False)
    name = request.pop("chat_template", None)
    templates, special = load_model_dir(model_dir)
    compiled = compile_template(select_template(templates, tools, name))
    if continue_final_message:
        if add_generation_prompt:
            raise ValueError("continue_final_message and add_generation_prompt are not compatible")
        messages = json.loads(json.dumps(messages))
        final_message = messages[-1]["content"]
        if isinstance(final_message, (list, tuple)):
            for block in reversed(final_message):
                if "text" in block:
                    final_message = block["text"]
                    block["text"] = block["text"] + CONTINUE_FINAL_MESSAGE_TAG
                    break
            else:
                raise ValueError("no text to continue in the final message")
        else:
            messages[-1]["content"] = messages[-1]["content"] + CONTINUE_FINAL_MESSAGE_TAG
    kwargs = {**special, **request}
    rendered = compiled.render(
        messages=messages, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt, **kwargs
    )
    if continue_final_message:
        if final_message.strip() not in rendered or CONTINUE_FINAL_MESSAGE_TAG.strip() not in rendered:
            raise ValueError("the final message does not appear in the rendered chat")
        if final_message.strip() == final_message:
            rendered = rendered[: rendered.rindex(CONTINUE_FINAL_MESSAGE_TAG)]
        else:
            rendered = rendered[: rendered.rindex(CONTINUE_FINAL_MESSAGE_TAG.rstrip())]
    return rendered
