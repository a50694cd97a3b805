"""The C++ Jinja2 engine against jinja2 itself (configured as Hugging Face configures it), on many
small templates covering the language features chat templates use: whitespace control, operators,
Python value printing, tests, filters, methods, loops, macros, namespaces, scoping, undefined
semantics and errors. All cases render in one jinja_render_cases process.
"""
import json
import os
import subprocess

import jinja2
import pytest

import jinja_family_templates
from jinja_hf_oracle import compile_template

BUILD_DIR = os.environ.get("SPARKSERVE_BUILD_DIR", "build")
RENDERER = os.path.join(BUILD_DIR, "tests", "jinja_render_cases")

XS = {"xs": [3, 1, 2], "d": {"a": 1, "b": "two", "c": [1, 2]}, "s": "Hello, World", "u": "héllo wörld ✓"}
USERS = {"people": [{"name": "bob", "age": 30, "role": "user"}, {"name": "Alice", "age": 25, "role": "admin"},
                    {"name": "carol", "role": "user"}]}

CASES = [
    # --- whitespace: trim_blocks, lstrip_blocks, -/+ markers, comments, raw, newlines ---
    ("ws_lstrip_trim", "a\n  {% if x %}\n  b\n  {% endif %}\n c", {"x": True}),
    ("ws_lstrip_trim_false", "a\n  {% if x %}\n  b\n  {% endif %}\n c", {"x": False}),
    ("ws_minus", "x  {%- if true -%}  y  {%- endif -%}  z", {}),
    ("ws_var_minus", "a  {{- ' b ' -}}  c", {}),
    ("ws_var_no_lstrip", "a\n  {{ 'b' }}\n  {{ 'c' }}\n", {}),
    ("ws_comment", "{# comment #}\nx\n  {# indented #}\ny{#- tight -#}  z", {}),
    ("ws_plus", "a\n  {%+ if true %}b{% endif +%}\nc", {}),
    ("ws_raw", "{% raw %}{{ not rendered }}{% endraw %}|{%- raw -%}  x  {%- endraw -%}  |", {}),
    ("ws_crlf", "line1\r\nline2\r\n{% if true %}\r\nx\r\n{% endif %}\r\n", {}),
    ("ws_trailing_newline", "x\n\n", {}),
    ("ws_braces_in_text", "a { b } {x} %} }}", {}),
    ("ws_for_lines", "{% for i in range(3) %}\n  {{ i }}\n{% endfor %}\nend", {}),
    ("ws_set_line", "  {% set x = 1 %}\n{{ x }}", {}),
    ("ws_block_after_var", "{{ 'a' }}   {% if true %}b{% endif %}", {}),
    ("ws_minus_newlines", "a\n\n   {%- for i in [1, 2] -%}\n\n {{ i }} \n\n  {%- endfor %}\n\nb", {}),
    ("ws_dict_in_var", "{{ {'a': {'b': 1}} }}", {}),
    # --- literals and printing (Python str/repr) ---
    ("print_values", "{{ [1, 'a', none, true, 1.5, (1,), {'a': [2]}, false] }}", {}),
    ("print_dict", "{{ {'a': 1, 'b': 'c', 3: none} }}", {}),
    ("print_tuples", "{{ ('a',) }}|{{ () }}|{{ (1, 2) }}|{{ 1, 2 }}", {}),
    ("print_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'a\\nb\\t\\\\'] }}", {}),
    ("print_unicode_repr", "{{ ['é', '\\u200b', '✓', '\\x00', '\\x7f', '\\U0001F600'] }}", {}),
    ("print_floats", "{{ [1.0, 2.50, 1e-7, 1e16, 1e15, 0.1 + 0.2, 1/3, 100000000000000000.0, -0.0] }}", {}),
    ("print_numbers", "{{ 1.0 }} {{ 1e3 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 12.5e-1 }}", {}),
    ("print_none_bool", "{{ none }} {{ None }} {{ true }} {{ False }}", {}),
    ("string_escapes", "{{ 'a\\tb\\n\\u00e9\\x41\\101' }}|{{ \"x\" 'y' \"z\" }}", {}),
    ("print_json_input", "{{ v }}", {"v": {"k": [1, 2.5, None, True, "s"], "n": {}}}),
    # --- arithmetic like Python ---
    ("arith_int", "{{ 1 + 2 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }}", {}),
    ("arith_float", "{{ 2 ** -1 }} {{ 2.5 * 2 }} {{ 10 / 4 }} {{ 10 / 5 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 3 - 5.0 }}", {}),
    ("arith_unary", "{{ -(3) }} {{ +3 }} {{ - 2.5 }} {{ not 0 }} {{ -xs[0] }}", XS),
    ("arith_bool", "{{ true + 1 }} {{ true * 3 }} {{ false - 1 }}", {}),
    ("arith_seq", "{{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1, 2] + [3] }} {{ 'a' + 'b' }} {{ 3 * 'x' }} {{ (1,) + (2,) }}", {}),
    ("concat", "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ [1] ~ x }}", {}),
    ("err_str_plus_int", "{{ 'a' + 1 }}", {}),
    ("err_int_plus_str", "{{ 1 + 'a' }}", {}),
    ("err_div_zero", "{{ 1 / 0 }}", {}),
    ("err_mod_zero", "{{ 1 % 0 }}", {}),
    ("err_list_plus_str", "{{ [1] + 'a' }}", {}),
    ("string_percent", "{{ '%s-%d' % ('a', 3) }}|{{ '%05.2f|%-4s|%r' % (3.14159, 'ab', 'x') }}|{{ '%s' % 'x' }}", {}),
    # --- comparisons and logic ---
    ("compare", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2 }} {{ 1 != 1 }}", {}),
    ("compare_none", "{{ none == none }} {{ none == 0 }} {{ x == x }} {{ x == none }} {{ [1] == (1,) }} {{ {'a': 1} == {'a': 1} }}", {}),
    ("err_compare_types", "{{ 'a' < 1 }}", {}),
    ("err_compare_undefined", "{{ x < 1 }}", {}),
    ("in_ops", "{{ 'b' in 'abc' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' not in 'abc' }} {{ 'a' in x }} {{ 3 in (1, 3) }}", {}),
    ("err_in_int_string", "{{ 1 in 'abc' }}", {}),
    ("err_in_none", "{{ 'a' in none }}", {}),
    ("logic", "{{ 0 or 'b' }} {{ 'a' and 'b' }} {{ none and 1 }} {{ not [] }} {{ x or 'dflt' }} {{ [] or {} }} {{ 1 and 0 }}", {}),
    ("cond_expr", "{{ 'y' if true else 'n' }}|{{ 'y' if false }}|{{ 'a' if x is defined else 'b' }}|{{ 1 if 0 else 2 if 1 else 3 }}", {}),
    # --- subscripts, attributes, slices ---
    ("subscripts", "{{ xs[0] }} {{ xs[-1] }} [{{ xs[10] }}] {{ xs.0 }} {{ d['a'] }} {{ d.b }} [{{ d.missing }}] {{ d.c[1] }}", XS),
    ("slices", "{{ xs[::-1] }} {{ xs[1:] }} {{ xs[:2] }} {{ xs[::2] }} {{ xs[-2:] }} {{ xs[5:] }} {{ xs[1:-1] }} {{ xs[:-5] }} {{ xs[::-2] }}", XS),
    ("string_index", "{{ u[1] }} {{ u[::-1] }} {{ s[1:3] }} {{ s[-5:] }} {{ u|length }} {{ u[100:] }}", XS),
    ("dict_methods", "{{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('zz', 5) }} {{ d.get('zz') }}", XS),
    ("dict_key_named_like_method", "{{ m['items'] is string }} {{ m.get('items') }}", {"m": {"items": "x"}}),
    ("err_attr_of_undefined", "{{ d.missing.x }}", XS),
    ("err_item_of_undefined", "{{ x[0] }}", {}),
    ("none_attr", "[{{ none.x }}] [{{ s.nope }}] [{{ d.b.nope }}] [{{ ''.__class__ }}]", XS),
    ("err_none_attr_attr", "{{ none.x.y }}", {}),
    ("err_call_undefined", "{{ nope() }}", {}),
    ("err_call_string", "{{ 'a'() }}", {}),
    # --- tests ---
    ("tests_types", "{{ 1 is number }} {{ true is number }} {{ true is integer }} {{ 1.0 is float }} {{ 1 is integer }} {{ 'a' is string }} {{ none is none }} {{ true is boolean }} {{ 1 is boolean }}", {}),
    ("tests_containers", "{{ [1] is sequence }} {{ 'a' is sequence }} {{ {} is sequence }} {{ {} is mapping }} {{ [] is mapping }} {{ [] is iterable }} {{ 1 is iterable }} {{ 'a' is iterable }} {{ none is iterable }}", {}),
    ("tests_undefined", "{{ x is defined }} {{ x is undefined }} {{ x is iterable }} {{ x is sequence }} {{ x is callable }} {{ x is none }} {{ x is string }} {{ x is mapping }} {{ x is not defined }}", {}),
    ("tests_numbers", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 1 is eq 1 }} {{ 'a' is equalto 'a' }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ 2 is ge 2 }} {{ 1 is ne 2 }} {{ 2 is == 2 }}", {}),
    ("tests_misc", "{{ 1 is in [1] }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ none is sameas none }} {{ 'ABC' is upper }} {{ 'abc' is lower }} {{ range is callable }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'zz' is filter }}", {}),
    ("tests_in_expressions", "{{ x is defined and x }} {{ not y is defined }} {{ (xs|length) is odd }} {{ xs|length is odd }}", {"x": "v", "xs": [1, 2]}),
    ("err_unknown_test", "{{ 1 is nosuchtest }}", {}),
    # --- filters ---
    ("f_trim", "[{{ '  a b \\n'|trim }}] [{{ 'xxaxx'|trim('x') }}] [{{ x|trim }}] [{{ 5|trim }}]", {}),
    ("f_items", "{{ d|items|list }} {% for k, v in d|items %}{{ k }}={{ v }};{% endfor %} {{ x|items|list }}", XS),
    ("err_f_items_string", "{{ 'abc'|items|list }}", {}),
    ("f_tojson", "{{ v|tojson }}", {"v": {"b": 1, "a": [1.5, None, True, "é<>&'\"\\\n\t\u0001"], "c": {}, "e": [], "f": 1e20}}),
    ("f_tojson_args", "{{ v|tojson(indent=2) }}|{{ v|tojson(separators=(',', ':')) }}|{{ v|tojson(sort_keys=true) }}|{{ v|tojson(ensure_ascii=true) }}|{{ v|tojson(indent='\\t') }}|{{ [] |tojson(indent=2) }}|{{ v|tojson(indent=0) }}", {"v": {"z": [1, {"y": "ü😀"}], "a": None}}),
    ("f_tojson_tuple_and_keys", "{{ {1: (1, 2), true: 'x', none: 1.0}|tojson }}|{{ 'str'|tojson }}|{{ 3|tojson }}", {}),
    ("err_f_tojson_undefined", "{{ x|tojson }}", {}),
    ("f_safe_string", "{{ 5|safe }} {{ none|string }} {{ [1, 'a']|string }} {{ x|safe }}|{{ (5|string) is string }}", {}),
    ("f_length", "{{ u|length }} {{ xs|length }} {{ d|length }} {{ x|length }} {{ xs|count }}", XS),
    ("err_f_length_int", "{{ 5|length }}", {}),
    ("f_default", "{{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }} {{ x|d('e') }} {{ 0|default(1, boolean=true) }}", {}),
    ("f_case", "{{ 'hELLo wOrld'|lower }} {{ 'hello'|upper }} {{ 'hello world-foo(bar [baz <q'|title }} {{ 'hELLO wORLD'|capitalize }} {{ 'ß é'|upper }}", {}),
    ("f_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} {{ 123|replace('2', 'x') }}", {}),
    ("f_join", "{{ xs|join }} {{ xs|join(', ') }} {{ people|join(' ', attribute='name') }} {{ [1, none, x]|join('|') }}", {**XS, **USERS}),
    ("f_first_last", "{{ xs|first }} {{ xs|last }} [{{ []|first }}] {{ 'abc'|first }} {{ 'abc'|last }} {{ d|first }} {{ d|last }}", XS),
    ("f_list", "{{ 'abc'|list }} {{ d|list }} {{ (1, 2)|list }} {{ x|list }}", XS),
    ("f_map", "{{ people|map(attribute='name')|list }} {{ ['a', 'b']|map('upper')|list }} {{ people|map(attribute='age', default=0)|list }} {{ people|map(attribute='age')|list }} {{ ['a ', ' b']|map('trim')|join(',') }}", USERS),
    ("f_select", "{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ [1, 5, 3]|select('gt', 2)|list }}", {}),
    ("f_selectattr", "{{ people|selectattr('role', 'equalto', 'user')|map(attribute='name')|list }} {{ people|rejectattr('age')|map(attribute='name')|list }} {{ people|selectattr('age', 'defined')|list|length }} {{ people|selectattr('age', 'gt', 26)|map(attribute='name')|join }}", USERS),
    ("f_sort", "{{ xs|sort }} {{ xs|sort(reverse=true) }} {{ ['b', 'A', 'a', 'B']|sort }} {{ ['b', 'A', 'a', 'B']|sort(case_sensitive=true) }} {{ people|sort(attribute='name')|map(attribute='name')|list }}", {**XS, **USERS}),
    ("err_f_sort_mixed", "{{ [1, 'a']|sort }}", {}),
    ("f_unique", "{{ [1, 2, 1, 3, 2]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ ['a', 'A', 'b']|unique(case_sensitive=true)|list }} {{ people|unique(attribute='role')|map(attribute='name')|list }}", USERS),
    ("f_int_float", "{{ '42'|int }} {{ '3.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ true|int }} {{ ' 12 '|int }} {{ '1_000'|int }} {{ '-5'|int }} {{ 'ff'|int(base=16) }} {{ none|int }}", {}),
    ("f_float", "{{ '1.5'|float }} {{ 'x'|float }} {{ 3|float }} {{ ' 2e3 '|float }} {{ 'x'|float(1.5) }} {{ true|float }}", {}),
    ("f_abs_round", "{{ -3|abs }} {{ (-2.5)|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 3.14159|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ 7|round }} {{ 2.675|round(2) }} {{ (-0.5)|round }} {{ 1234.5678|round(-2) }}", {}),
    ("f_indent", "[{{ 'a\\nb\\n\\nc'|indent }}] [{{ 'a\\nb'|indent(2, true) }}] [{{ 'a\\n\\nb\\n'|indent(2, blank=true) }}] [{{ 'x\\ny'|indent('> ') }}]", {}),
    ("f_wordcount_dictsort", "{{ 'Hello, world! foo_bar 42 é'|wordcount }} {{ {'b': 1, 'a': 2, 'C': 0}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}", {}),
    ("f_batch", "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }}", {}),
    ("f_minmax_sum", "{{ xs|max }} {{ xs|min }} {{ xs|sum }} {{ people|sum(attribute='age', start=1) if false else 0 }} {{ ['b', 'A']|max }} {{ ['b', 'A']|min(case_sensitive=true) }} [{{ []|max }}]", {**XS, **USERS}),
    ("f_reverse_center", "{{ 'abc'|reverse }} {{ xs|reverse|list }} [{{ 'ab'|center(7) }}] [{{ 'abc'|center(6) }}]", XS),
    ("f_format_escape_attr", "{{ '%s-%s'|format('a', 1) }} {{ '%(x)s!'|format(x=2) }} {{ '<a href=\"x\">&\\''|escape }} {{ '<b>'|e }} [{{ d|attr('a') }}] {{ d|attr('items') is callable }}", XS),
    ("err_f_unknown", "{{ 1|nosuchfilter }}", {}),
    ("err_f_unknown_in_dead_code", "{% if false %}{{ 1|nosuchfilter }}{% endif %}ok", {}),
    ("f_chain", "{{ people|selectattr('role', 'eq', 'user')|map(attribute='name')|map('capitalize')|sort|join(', ')|upper }}", USERS),
    # --- string methods ---
    ("m_affixes", "{{ s.startswith('Hell') }} {{ s.startswith(('x', 'He')) }} {{ s.endswith('World') }} {{ s.endswith('x') }} {{ s.startswith('World', 7) }}", XS),
    ("m_split", "{{ ' a  b c '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b '.rsplit(None, 1) }} {{ ''.split() }} {{ ''.split(',') }}", {}),
    ("m_strip", "[{{ '  x  '.strip() }}] [{{ '\\n\\nx\\n'.lstrip('\\n') }}] [{{ 'xxyxx'.rstrip('x') }}] [{{ '\\u3000x\\t'.strip() }}]", {}),
    ("m_case_find", "{{ s.upper() }} {{ s.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('z') }} {{ s.count('l') }} {{ u.find('w') }} {{ 'AbC'.swapcase() }}", XS),
    ("m_replace_join", "{{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 1) }} {{ '-'.join(['a', 'b']) }} {{ ', '.join(d) }}", XS),
    ("m_format", "{{ '{} {}'.format(1, 'a') }} {{ '{0}-{name}'.format(1, name='x') }} {{ '{:>5}'.format('a') }} {{ '{:.2f}'.format(3.14159) }} {{ '{{}}{}'.format(2) }} {{ '{!r}'.format('q') }}", {}),
    ("m_predicates", "{{ '123'.isdigit() }} {{ '12a'.isdigit() }} {{ 'abc'.isalpha() }} {{ ' \\t'.isspace() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }} {{ 'a1'.isalnum() }}", {}),
    ("m_misc", "{{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'k=v=w'.partition('=') }} {{ 'k=v=w'.rpartition('=') }} {{ '42'.zfill(5) }} {{ 'ab'.center(6, '*') }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'a.txt'.removesuffix('.txt') }}", {}),
    ("err_m_list_append", "{{ xs.append(4) }}", XS),
    ("err_m_dict_update", "{{ d.update({'z': 1}) }}", XS),
    ("err_m_dict_pop", "{{ d.pop('a') }}", XS),
    ("m_list_index_count", "{{ xs.index(1) }} {{ [1, 1, 2].count(1) }}", XS),
    # --- loops ---
    ("loop_vars", "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}", XS),
    ("loop_prev_next", "{% for x in xs %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.previtem is defined }}]{% endfor %}", XS),
    ("loop_cycle_changed", "{% for x in [1, 1, 2, 3, 3] %}{{ loop.cycle('a', 'b', 'c') }}{{ loop.changed(x) }} {% endfor %}", {}),
    ("loop_else", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", XS),
    ("loop_filter", "{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}", XS),
    ("loop_break_continue", "{% for x in range(10) %}{% if x is even %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("loop_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}{% for (a, b) in [(5, 6)] %}{{ a * b }}{% endfor %}", XS),
    ("loop_dict_string", "{% for k in d %}{{ k }}{% endfor %} {% for c in 'héy' %}[{{ c }}]{% endfor %} {% for x in nothing %}no{% endfor %}", XS),
    ("err_loop_none", "{% for x in none %}{% endfor %}", {}),
    ("err_loop_int", "{% for x in 5 %}{% endfor %}", {}),
    ("err_loop_unpack", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("loop_nested", "{% for row in [[1, 2], [3]] %}{% set outer = loop %}{% for c in row %}{{ outer.index }}.{{ loop.index }}={{ c }} {% endfor %}{% endfor %}", {}),
    ("loop_scoping", "{% set x = 1 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }},{% endfor %}{{ x }}", {}),
    ("loop_scoping_if", "{% set x = 'out' %}{% if true %}{% set x = 'if' %}{% endif %}{{ x }}{% for i in [1] %}{% set y = 'loop' %}{% endfor %}[{{ y }}]", {}),
    ("loop_over_reversed_messages", "{% for m in msgs[::-1] %}{% set i = (msgs|length - 1) - loop.index0 %}{{ i }}:{{ m }} {% endfor %}", {"msgs": ["a", "b", "c"]}),
    # --- set, namespace, with, filter blocks ---
    ("set_forms", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, %}{{ t }}{% set x %}hi {{ a }}{% endset %}{{ x|upper }}{% set y | trim | upper %}  abc  {% endset %}[{{ y }}]", {}),
    ("namespace", "{% set ns = namespace(a=1, items=[]) %}{% for x in xs %}{% set ns.a = ns.a + x %}{% set ns.items = ns.items + [x] %}{% endfor %}{{ ns.a }} {{ ns.items }} [{{ ns.nope }}] {{ ns['a'] }}", XS),
    ("namespace_from_dict", "{% set ns = namespace({'k': 'v'}, z=2) %}{{ ns.k }}{{ ns.z }}", {}),
    ("err_set_attr_non_namespace", "{% set d.a = 5 %}", XS),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("filter_block", "{% filter upper %}abc {{ 'def' }}{% endfilter %}|{% filter replace('a', 'b')|upper %}aaa{% endfilter %}", {}),
    ("generation_block", "x{% generation %}gen {{ 1 }}{% endgeneration %}y", {}),
    # --- macros ---
    ("macro_defaults", "{% macro m(a, b=2, c='x') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(1, c='z') }} {{ m(a=5) }} [{{ m() }}]", {}),
    ("macro_trim_scope", "{% set g = 'global' %}{% macro m(x) %}\n  {% set local = x * 2 %}\n  {{ local }} {{ g }}\n{% endmacro %}[{{ m(2)|trim }}][{{ local }}]", {}),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }} {{ varargs }} {{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}", {}),
    ("macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_calls_macro", "{% macro inner(x) %}<{{ x }}>{% endmacro %}{% macro outer(xs) %}{% for x in xs %}{{ inner(x) }}{% endfor %}{% endmacro %}{{ outer([1, 2]) }}", {}),
    ("macro_default_refers_param", "{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }}", {}),
    ("err_macro_too_many", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("err_macro_bad_kw", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", {}),
    ("macro_namespace_counter", "{% set c = namespace(n=0) %}{% macro bump() %}{% set c.n = c.n + 1 %}{{ c.n }}{% endmacro %}{{ bump() }}{{ bump() }}{{ c.n }}", {}),
    # --- globals ---
    ("globals", "{{ range(5)|list }} {{ range(1, 5)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=[2]) }} {{ dict(a=1)|tojson }}", {}),
    ("joiner_cycler", "{% set j = joiner(' | ') %}{% for x in xs %}{{ j() }}{{ x }}{% endfor %} {% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}", XS),
    ("raise_exception", "before{{ raise_exception('Custom: ' ~ x) }}", {"x": 42}),
    ("raise_in_macro", "{% macro check(m) %}{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('Bad role ' + m.role) }}{% endif %}{% endmacro %}{% for m in msgs %}{{ check(m) }}{% endfor %}", {"msgs": [{"role": "user"}, {"role": "robot"}]}),
    ("strftime_now", "{{ strftime_now('%Y-%m') }}", {}),
    ("err_range_too_big", "{{ range(200000)|length }}", {}),
    # --- syntax errors ---
    ("err_syntax_if", "{% if %}x{% endif %}", {}),
    ("err_syntax_empty_var", "{{ }}", {}),
    ("err_syntax_stray_end", "{% endfor %}", {}),
    ("err_syntax_unclosed", "{% if x %}abc", {}),
    ("err_syntax_do", "{% do x %}", {}),
    ("err_syntax_string", "{{ 'unterminated }}", {}),
    ("err_syntax_paren", "{{ (1 }}", {}),
    ("err_syntax_comment", "{# never closed", {}),
    ("err_syntax_elif_after_else", "{% if a %}{% else %}{% elif b %}{% endif %}", {}),
    ("err_syntax_chained_is", "{{ 1 is number is number }}", {}),
] + jinja_family_templates.CASES


def run_ours(cases):
    lines = "".join(json.dumps({"template": t, "context": c}) + "\n" for _, t, c in cases)
    proc = subprocess.run([RENDERER], input=lines.encode(), capture_output=True, timeout=60, check=True)
    results = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert len(results) == len(cases)
    return results


def run_oracle(template, context):
    """('ok', text) | ('raised', message) for raise_exception | ('error', description)."""
    try:
        return "ok", compile_template(template).render(**context)
    except jinja2.exceptions.TemplateError as e:
        if type(e) is jinja2.exceptions.TemplateError:
            return "raised", e.message
        return "error", f"{type(e).__name__}: {e}"
    except Exception as e:  # TypeError, ValueError... raised inside the template
        return "error", f"{type(e).__name__}: {e}"


@pytest.fixture(scope="module")
def ours():
    assert os.path.exists(RENDERER), f"{RENDERER} not built (ninja -C build jinja_render_cases)"
    return dict(zip((c[0] for c in CASES), run_ours(CASES)))


def test_case_ids_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case_id,template,context", CASES, ids=[c[0] for c in CASES])
def test_matches_jinja2(ours, case_id, template, context):
    kind, expected = run_oracle(template, context)
    got = ours[case_id]
    if kind == "ok":
        assert "error" not in got, f"jinja2 rendered {expected!r} but we failed: {got['error']}"
        assert got["output"] == expected
    elif kind == "raised":
        assert "error" in got, f"jinja2 raised {expected!r}, we rendered {got.get('output')!r}"
        assert got["raised"] == expected
    else:
        assert "error" in got, f"jinja2 failed ({expected}), we rendered {got.get('output')!r}"
        assert got["raised"] is None
        assert got["error"].startswith("case")  # our errors name the template and position
