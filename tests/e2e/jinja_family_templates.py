"""Small chat templates written in the style of other model families (Llama 3, Mistral, Gemma,
DeepSeek, Phi, Hermes/Command-R tool prompts), exercising the constructs those families use:
reassigning `messages`, role-alternation checks, rely-on-trim_blocks layouts, namespaces with
several flags, tojson(indent=...), recursive macros over JSON schemas, `'key' in message`,
selectattr/map chains, .strip()/.split() on content. Not copies of the real templates; used by
test_jinja_engine.py with the conversations below.
"""

LLAMA3 = r"""{{- bos_token }}
{%- if custom_tools is defined %}{%- set tools = custom_tools %}{%- endif %}
{%- if not tools_in_user_message is defined %}{%- set tools_in_user_message = true %}{%- endif %}
{%- if not date_string is defined %}{%- set date_string = "26 Jul 2024" %}{%- endif %}
{%- if not tools is defined %}{%- set tools = none %}{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
    {%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, respond with a JSON function call.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("Only single tool-calls are supported.") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", "parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable and message.content is not string %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

MISTRAL = r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.last and system_message is defined %}
            {{- '[INST] ' + system_message + '\n\n' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {%- if message.tool_calls is defined and message.tool_calls is not none %}
            {{- "[TOOL_CALLS] [" }}
            {%- for tool_call in message.tool_calls %}
                {%- set tc = tool_call.function %}
                {%- if tool_call.id is not defined or tool_call.id|length != 9 %}
                    {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
                {%- endif %}
                {{- '{"name": "' + tc.name + '", "arguments": ' + tc.arguments|tojson + ', "id": "' + tool_call.id + '"}' }}
                {{- ", " if not loop.last else "]" + eos_token }}
            {%- endfor %}
        {%- else %}
            {{- ' ' + message['content']|trim + eos_token }}
        {%- endif %}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
[{{ user_messages|length }} user turns]"""

GEMMA = r"""{{ bos_token }}
{% if messages[0]['role'] == 'system' %}
    {% set first_user_prefix = messages[0]['content'] + '\n\n' %}
    {% set loop_messages = messages[1:] %}
{% else %}
    {% set first_user_prefix = "" %}
    {% set loop_messages = messages %}
{% endif %}
{% for message in loop_messages %}
    {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {% endif %}
    {% if (message['role'] == 'assistant') %}
        {% set role = "model" %}
    {% else %}
        {% set role = message['role'] %}
    {% endif %}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {% if message['content'] is string %}
        {{ message['content'] | trim }}
    {% elif message['content'] is iterable %}
        {% for item in message['content'] %}
            {% if item['type'] == 'image' %}
                {{ '<start_of_image>' }}
            {% elif item['type'] == 'text' %}
                {{ item['text'] | trim }}
            {% endif %}
        {% endfor %}
    {% else %}
        {{ raise_exception("Invalid content type") }}
    {% endif %}
    {{ '<end_of_turn>\n' }}
{% endfor %}
{% if add_generation_prompt %}
    {{'<start_of_turn>model\n'}}
{% endif %}
"""

DEEPSEEK = r"""{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}
{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true) %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {%- if ns.is_first_sp %}
            {% set ns.system_prompt = ns.system_prompt + message['content'] %}
            {% set ns.is_first_sp = false %}
        {%- else %}
            {% set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] %}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{{ bos_token }}{{ ns.system_prompt }}
{%- for message in messages %}
    {%- if message['role'] == 'user' %}
        {%- set ns.is_tool = false -%}
        {{'<|User|>' + message['content']}}
    {%- endif %}
    {%- if message['role'] == 'assistant' and 'tool_calls' in message %}
        {%- set ns.is_tool = false -%}
        {%- for tool in message['tool_calls'] %}
            {%- if not ns.is_first %}
                {%- if message['content'] is none %}
                    {{'<|Assistant|><|tool_calls_begin|><|tool_call_begin|>' + tool['type'] + '<|tool_sep|>' + tool['function']['name'] + '\n```json\n' + tool['function']['arguments'] + '\n```<|tool_call_end|>'}}
                {%- else %}
                    {{'<|Assistant|>' + message['content'] + '<|tool_calls_begin|><|tool_call_begin|>' + tool['type'] + '<|tool_sep|>' + tool['function']['name'] + '\n```json\n' + tool['function']['arguments'] + '\n```<|tool_call_end|>'}}
                {%- endif %}
                {%- set ns.is_first = true -%}
            {%- else %}
                {{'\n<|tool_call_begin|>' + tool['type'] + '<|tool_sep|>' + tool['function']['name'] + '\n```json\n' + tool['function']['arguments'] + '\n```<|tool_call_end|>'}}
            {%- endif %}
        {%- endfor %}
        {{'<|tool_calls_end|><|end_of_sentence|>'}}
    {%- endif %}
    {%- if message['role'] == 'assistant' and 'tool_calls' not in message %}
        {%- if ns.is_tool %}
            {{'<|tool_outputs_end|>' + message['content'] + '<|end_of_sentence|>'}}
            {%- set ns.is_tool = false -%}
        {%- else %}
            {% set content = message['content'] %}
            {% if '</think>' in content %}
                {% set content = content.split('</think>')[-1] %}
            {% endif %}
            {{'<|Assistant|>' + content + '<|end_of_sentence|>'}}
        {%- endif %}
    {%- endif %}
    {%- if message['role'] == 'tool' %}
        {%- set ns.is_tool = true -%}
        {%- if ns.is_output_first %}
            {{'<|tool_outputs_begin|><|tool_output_begin|>' + message['content'] + '<|tool_output_end|>'}}
            {%- set ns.is_output_first = false %}
        {%- else %}
            {{'<|tool_output_begin|>' + message['content'] + '<|tool_output_end|>'}}
        {%- endif %}
    {%- endif %}
{%- endfor -%}
{% if ns.is_tool %}{{'<|tool_outputs_end|>'}}{% endif %}
{% if add_generation_prompt and not ns.is_tool %}{{'<|Assistant|><think>\n'}}{% endif %}"""

PHI = r"""{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"""

HERMES_TOOLS = r"""{%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {"string": "str", "number": "float", "integer": "int", "boolean": "bool"} %}
{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec|items|selectattr(0, "eq", "items")|map(attribute=1)|first) + "]" }}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']' }}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
        {{- json_to_python_type({"type": t}) }}
        {%- if not loop.last %}{{- "," }}{%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}
{{- bos_token }}
{{- "<|im_start|>system\nYou are a function calling AI model. Here are the available tools: <tools> " }}
{%- for tool in tools %}
    {%- if tool.function is defined %}
        {%- set tool = tool.function %}
    {%- endif %}
    {{- '{"type": "function", "function": ' }}
    {{- '{"name": "' + tool.name + '", ' }}
    {{- '"description": "' + tool.name + '(' }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {{- param_name + ": " + json_to_python_type(param_fields) }}
        {%- if not loop.last %}
            {{- ", " }}
        {%- endif %}
    {%- endfor %}
    {{- ")" }}
    {%- if tool.return is defined %}
        {{- " -> " + json_to_python_type(tool.return) }}
    {%- endif %}
    {{- " - " + tool.description + "\n\n" }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {%- if loop.first %}
            {{- "    Args:\n" }}
        {%- endif %}
        {{- "        " + param_name + "(" + json_to_python_type(param_fields) + "): " + param_fields.description|default('')|trim }}
    {%- endfor %}
    {{- '", "parameters": ' }}
    {%- if tool.parameters.properties | length == 0 %}
        {{- "{}" }}
    {%- else %}
        {{- tool.parameters|tojson }}
    {%- endif %}
    {{- "}" }}
    {%- if not loop.last %}
        {{- "\n" }}
    {%- endif %}
{%- endfor %}
{{- " </tools><|im_end|>\n" }}
{%- for message in messages %}
    {%- if message.role == "user" or message.role == "system" or (message.role == "assistant" and message.tool_calls is not defined) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- for tool_call in message.tool_calls %}
            {{- '\n<tool_call>\n' }}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '{' }}
            {{- '"name": "' }}
            {{- tool_call.name }}
            {{- '"' }}
            {%- if tool_call.arguments is defined %}
                {{- ', ' }}
                {{- '"arguments": ' }}
                {{- tool_call.arguments|tojson }}
            {%- endif %}
            {{- '}' }}
            {{- '\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}
            {{- '<|im_start|>tool\n' }}
        {%- endif %}
        {{- '<tool_response>\n' }}
        {{- message.content }}
        {%- if not loop.last %}
            {{- '\n</tool_response>\n' }}
        {%- else %}
            {{- '\n</tool_response>' }}
        {%- endif %}
        {%- if not loop.last and loop.nextitem.role != "tool" %}
            {{- '<|im_end|>' }}
        {%- elif loop.last %}
            {{- '<|im_end|>' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

LLAMA2 = r"""{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% elif false == true and not '<<SYS>>' in messages[0]['content'] %}{% set loop_messages = messages %}{% set system_message = 'Default.' %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'system' %}{{ '<<SYS>>\n' + content.strip() + '\n<</SYS>>\n\n' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"""

TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}
SYSTEM = {"role": "system", "content": "  You are terse.  "}
USER = {"role": "user", "content": "Hello there!  "}
ASSISTANT = {"role": "assistant", "content": " Hi. <think>x</think>Done "}
USER2 = {"role": "user", "content": "Weather in Paris?"}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get weather.",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string", "description": "  The city "},
               "days": {"type": ["integer", "number"]},
               "tags": {"type": "array", "items": {"type": "string"}},
               "opts": {"type": "object", "additionalProperties": {"type": "number"}},
               "raw": {}}, "required": ["city"]},
           "return": {"type": "object"}}}
CALL = {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
CALL_STR = {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
TOOL = {"role": "tool", "content": "sunny"}
TOOL_JSON = {"role": "tool", "content": {"temp": 20}}

# (template id, template, list of (case id, context))
FAMILIES = [
    ("llama3", LLAMA3, [
        ("plain", {**TOKENS, "messages": [SYSTEM, USER, ASSISTANT, USER2], "add_generation_prompt": True}),
        ("tools", {**TOKENS, "messages": [USER2, {"role": "assistant", "tool_calls": [CALL]}, TOOL, TOOL_JSON],
                   "tools": [WEATHER], "add_generation_prompt": True}),
        ("builtin_tools", {**TOKENS, "messages": [USER], "builtin_tools": ["brave_search", "code_interpreter", "wolfram"],
                           "date_string": "1 Jan 2025"}),
        ("tools_no_user", {**TOKENS, "messages": [SYSTEM], "tools": [WEATHER]}),
        ("two_calls", {**TOKENS, "messages": [USER, {"role": "assistant", "tool_calls": [CALL, CALL]}], "tools": [WEATHER]}),
    ]),
    ("mistral", MISTRAL, [
        ("plain", {**TOKENS, "messages": [SYSTEM, USER, ASSISTANT, USER2]}),
        ("tool_calls", {**TOKENS, "messages": [USER, {"role": "assistant", "tool_calls": [CALL, CALL_STR]}, USER2]}),
        ("bad_id", {**TOKENS, "messages": [USER, {"role": "assistant", "tool_calls": [{**CALL, "id": "short"}]}]}),
        ("not_alternating", {**TOKENS, "messages": [USER, USER2]}),
        ("bad_role", {**TOKENS, "messages": [USER, {"role": "tool", "content": "x"}]}),
    ]),
    ("gemma", GEMMA, [
        ("plain", {**TOKENS, "messages": [SYSTEM, USER, ASSISTANT, USER2], "add_generation_prompt": True}),
        ("images", {**TOKENS, "messages": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " What? "}]}],
                    "add_generation_prompt": True}),
        ("bad_content", {**TOKENS, "messages": [{"role": "user", "content": 5}]}),
        ("not_alternating", {**TOKENS, "messages": [USER, ASSISTANT, ASSISTANT]}),
    ]),
    ("deepseek", DEEPSEEK, [
        ("plain", {**TOKENS, "messages": [SYSTEM, SYSTEM, USER, ASSISTANT, USER2], "add_generation_prompt": True}),
        ("tools", {**TOKENS, "messages": [USER2, {"role": "assistant", "content": None, "tool_calls": [CALL_STR, CALL_STR]},
                                          TOOL, TOOL, {"role": "assistant", "content": "Sunny."}, USER], "add_generation_prompt": True}),
        ("ends_in_tool", {**TOKENS, "messages": [USER2, {"role": "assistant", "content": "Let me see.", "tool_calls": [CALL_STR]}, TOOL],
                          "add_generation_prompt": True}),
        ("no_gen_flag", {**TOKENS, "messages": [USER]}),
    ]),
    ("phi", PHI, [
        ("plain", {**TOKENS, "messages": [SYSTEM, USER, ASSISTANT], "add_generation_prompt": False}),
        ("empty_system", {**TOKENS, "messages": [{"role": "system", "content": ""}, USER], "add_generation_prompt": True}),
    ]),
    ("hermes", HERMES_TOOLS, [
        ("tools", {**TOKENS, "messages": [SYSTEM, USER2, {"role": "assistant", "tool_calls": [CALL, CALL_STR]}, TOOL, TOOL, ASSISTANT],
                   "tools": [WEATHER, {"name": "noop", "description": "Nothing.", "parameters": {"type": "object", "properties": {}}}],
                   "add_generation_prompt": True}),
    ]),
    ("llama2", LLAMA2, [
        ("system", {**TOKENS, "messages": [SYSTEM, USER, ASSISTANT, USER2]}),
        ("no_system", {**TOKENS, "messages": [USER, ASSISTANT]}),
        ("not_alternating", {**TOKENS, "messages": [ASSISTANT]}),
    ]),
]

CASES = [(f"family_{name}_{case}", template, context) for name, template, contexts in FAMILIES for case, context in contexts]
