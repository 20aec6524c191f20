"""The prompt side of a transformers causal LM, without torch: its chat template and its token counts.

In:  a transformers model folder: `tokenizer.json` (or, failing that, any tokenizer transformers can load, whose
     fast backend is then used), `tokenizer_config.json` (special tokens) and the chat template
     (`chat_template.jinja`, or the `chat_template` entry of `tokenizer_config.json`).
Out: `ChatTokenizer`: `render(messages)` (the chat template with the generation prompt), `encode(text)` (token ids,
     no special tokens added), `decode(ids)`, `cut(text, max_tokens)`, `left_padded(texts)` (a batch's ids and
     attention mask, padded with the pad token, else the end-of-sequence token), and both tokens' ids.

Why not transformers' tokenizer: importing it imports torch (about 2.5 s), and a stage whose requests are all
cached needs nothing but its prompts' cache keys, i.e. rendered and counted prompts. `tokenizers` and `jinja2`
load in a tenth of that. Encoding and decoding are the `tokenizers` library's, i.e. the backend of transformers'
fast tokenizers. The template is rendered as transformers' `apply_chat_template` renders it (same Jinja sandbox,
`trim_blocks`/`lstrip_blocks`, loop controls, `{% generation %}` blocks, the `tojson`, `raise_exception`,
`strftime_now`, `dict` and `namespace` helpers, the named special tokens as variables); tests compare the two.
"""

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from workflow_scripts.core.errors import InputError

SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json stores it: a string or an AddedToken dict."""
    return value.get("content") if isinstance(value, dict) else value


def _template_source(folder: Path, config: dict[str, Any]) -> str:
    path = folder / "chat_template.jinja"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        template = next((entry["template"] for entry in template if entry.get("name") == "default"), None)
    if not template:
        raise InputError(
            f"the model folder {folder} has no chat template (no chat_template.jinja and no chat_template in "
            f"tokenizer_config.json); name an instruction-tuned model"
        )
    return template


def _compile(source: str) -> Any:
    """`source` compiled in the environment transformers renders chat templates in."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        """`{% generation %}…{% endgeneration %}` marks assistant text for training masks; rendering keeps it."""

        tags = frozenset({"generation"})

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return caller()

    class Namespace(jinja2.utils.Namespace):
        """jinja's namespace without underscore-prefixed attributes (as transformers restricts it)."""

        def __init__(*args: Any, **kwargs: Any) -> None:
            self, attributes = args[0], dict(*args[1:], **kwargs)
            for name in attributes:
                Namespace._check(name)
            jinja2.utils.Namespace.__init__(self, attributes)

        def __setitem__(self, name: str, value: Any) -> None:
            Namespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"chat templates cannot set the attribute {name!r}")

    class TemplateDict:
        """`dict(...)` and `dict.fromkeys(...)` for templates, without exposing the type itself."""

        def __call__(self, *args: Any, **kwargs: Any) -> dict:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
            return dict.fromkeys(*args, **kwargs)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols]
    )
    environment.filters["tojson"] = tojson
    environment.globals.update(
        raise_exception=raise_exception, strftime_now=lambda fmt: datetime.now().strftime(fmt),
        dict=TemplateDict(), namespace=Namespace,
    )
    return environment.from_string(source)


def _backend_tokenizer(folder: Path) -> Any:
    from tokenizers import Tokenizer

    if (folder / "tokenizer.json").is_file():
        return Tokenizer.from_file(str(folder / "tokenizer.json"))
    from transformers import AutoTokenizer  # a slow-only folder: transformers builds the fast backend once

    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True).backend_tokenizer
    except (OSError, ValueError, AttributeError) as error:
        raise InputError(f"the model folder {folder} has no tokenizer this engine can use offline: {error}") from None


class ChatTokenizer:
    """Chat template, encoding and decoding of one model folder (see the module docstring)."""

    def __init__(self, folder: Path):
        self.folder = folder = Path(folder)
        config_path = folder / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
        self.special_tokens = {
            name: text for name in SPECIAL_TOKENS if (text := _token_text(config.get(name))) is not None
        }
        self.template = _compile(_template_source(folder, config))
        self.tokenizer = _backend_tokenizer(folder)
        self.eos_token_id = self._id("eos_token")
        if self.eos_token_id is None:
            raise InputError(
                f"the model folder {folder} names no end-of-sequence token its tokenizer knows (eos_token in "
                f"tokenizer_config.json); generation and padding need one"
            )
        pad = self._id("pad_token")
        self.pad_token_id = self.eos_token_id if pad is None else pad

    def _id(self, name: str) -> int | None:
        text = self.special_tokens.get(name)
        return None if text is None else self.tokenizer.token_to_id(text)

    def render(self, messages: list[dict[str, str]]) -> str:
        return self.template.render(
            messages=messages, tools=None, documents=None, add_generation_prompt=True, **self.special_tokens
        )

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def cut(self, text: str, max_tokens: int) -> str:
        """`text` cut to its first `max_tokens` tokens."""
        return self.decode(self.encode(text)[:max_tokens])

    def left_padded(self, texts: list[str]) -> tuple[list[list[int]], list[list[int]]]:
        """(input ids, attention mask) of `texts` padded on the left to the longest, as plain lists."""
        ids = [self.encode(text) for text in texts]
        width = max(map(len, ids))
        padded = [[self.pad_token_id] * (width - len(row)) + row for row in ids]
        return padded, [[0] * (width - len(row)) + [1] * len(row) for row in ids]
