"""Reading the specification's Markdown: its example blocks and its generated sections.

An example is a fenced ``json`` block announced by the HTML comment on the line before it::

    <!-- example: payment-required.response.json (SendMessage response) -->
    ```json
    { ... }
    ```

The comment names the file the block is published as under ``examples/`` and the type of the document
(``AgentCard``, ``JWKS``, or a JSON-RPC method with ``request``, ``response``, ``error`` or ``stream``,
or with ``http-request`` / ``http-response`` for the HTTP+JSON binding's bodies; an A2A 0.3 method is
named as on the 0.3 wire, e.g. ``message/send request``), which tells the checks what to validate it
as. Every ``json`` block must be announced, so that no JSON in the specification escapes the checks, and
other JSON-like fences (``jsonc``, ``json5``) are refused.

A generated section is the text between ``<!-- BEGIN GENERATED: <name> ... -->`` and
``<!-- END GENERATED: <name> -->``; ``spec.build`` owns it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Example",
    "SpecFormatError",
    "generated_section",
    "read_examples",
    "render_example",
    "replace_examples",
    "replace_generated",
    "section_anchors",
]

_HEADER = re.compile(
    r"<!-- example: (?P<name>[a-z0-9][a-z0-9.-]*\.json) "
    r"\((?P<type>[A-Za-z]+(?:/[A-Za-z]+)?(?: [a-z-]+)?)\) -->"
)
_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`\n]*)$")
_JSON_LIKE = frozenset({"json", "jsonc", "json5", "javascript", "js"})


class SpecFormatError(ValueError):
    """The specification's Markdown breaks one of the rules above; the message names the line."""

    code = "spec_format"


@dataclass(frozen=True, slots=True)
class Example:
    """One example block.

    Attributes:
        name: the file name under ``examples/``.
        type: the document type from the header, e.g. ``SendMessage response``.
        text: the block's content without the fences, ending in a newline.
        line: the 1-based line of the opening fence, for messages.
        start: the offset of the first content character in the Markdown.
        end: the offset just after the content (where the closing fence starts).
    """

    name: str
    type: str
    text: str
    line: int
    start: int
    end: int

    @property
    def document(self) -> Any:
        """The block's JSON value (parsed on each access, so callers may mutate what they get)."""
        return json.loads(self.text)


def render_example(document: Any) -> str:
    """The canonical text of an example: two-space indentation, UTF-8 characters kept, final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def read_examples(markdown: str) -> list[Example]:
    """Every example block of ``markdown``, in order.

    Raises:
        SpecFormatError: a ``json`` block without its header, a header without a ``json`` block after
            it, a JSON-like fence of another language, an unclosed fence, a repeated file name, or a
            block that is not valid JSON.
    """
    examples: list[Example] = []
    lines = markdown.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index].rstrip("\n"))
        header = _HEADER.fullmatch(lines[index].strip())
        if header is not None:
            opening = _FENCE.match(lines[index + 1].rstrip("\n")) if index + 1 < len(lines) else None
            if opening is None or opening.group("info").strip() != "json":
                raise SpecFormatError(
                    f"line {index + 1}: an example header must be followed by a ```json fence"
                )
        if fence is None:
            index += 1
            continue
        info = fence.group("info").strip().lower()
        close = _closing_fence(lines, index, fence.group("indent"))
        if info in _JSON_LIKE:
            if info != "json":
                raise SpecFormatError(f"line {index + 1}: use ```json for JSON, not ```{info}")
            announced = _HEADER.fullmatch(lines[index - 1].strip()) if index > 0 else None
            if announced is None:
                raise SpecFormatError(
                    f"line {index + 1}: a ```json block needs an example header on the line before"
                )
            start, end = offsets[index + 1], offsets[close]
            examples.append(
                Example(
                    announced.group("name"),
                    announced.group("type"),
                    markdown[start:end],
                    index + 1,
                    start,
                    end,
                )
            )
        index = close + 1
    _check_examples(examples)
    return examples


def replace_examples(markdown: str, texts: dict[str, str]) -> str:
    """``markdown`` with the content of each named example block replaced by ``texts[name]``."""
    result: list[str] = []
    position = 0
    for example in read_examples(markdown):
        if example.name in texts:
            result.append(markdown[position : example.start])
            result.append(texts[example.name])
            position = example.end
    result.append(markdown[position:])
    return "".join(result)


def generated_section(markdown: str, name: str) -> str:
    """The current content of the generated section ``name``.

    Raises:
        SpecFormatError: the section's markers are missing or repeated.
    """
    start, end = _section_bounds(markdown, name)
    return markdown[start:end]


def section_anchors(markdown: str) -> dict[str, str]:
    """Section number → the GitHub anchor of its heading (``### 4.3 Refusing…`` → ``43-refusing…``)."""
    anchors = {}
    for heading in re.findall(r"^#+ (\d+(?:\.\d+)*)\.? (.+)$", markdown, re.MULTILINE):
        number, title = heading
        text = f"{number} {title}" if "." in number else f"{number}. {title}"
        anchors[number] = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
    return anchors


def replace_generated(markdown: str, name: str, content: str) -> str:
    """``markdown`` with the generated section ``name`` holding ``content``.

    Raises:
        SpecFormatError: the section's markers are missing or repeated.
    """
    start, end = _section_bounds(markdown, name)
    return markdown[:start] + content + markdown[end:]


def _closing_fence(lines: list[str], opening: int, indent: str) -> int:
    for index in range(opening + 1, len(lines)):
        if lines[index].rstrip("\n") == f"{indent}```":
            return index
    raise SpecFormatError(f"line {opening + 1}: the fence is never closed")


def _check_examples(examples: list[Example]) -> None:
    seen: dict[str, int] = {}
    for example in examples:
        if example.name in seen:
            raise SpecFormatError(
                f"line {example.line}: example {example.name} is also at line {seen[example.name]}"
            )
        seen[example.name] = example.line
        try:
            json.loads(example.text)
        except json.JSONDecodeError as exc:
            raise SpecFormatError(
                f"line {example.line + exc.lineno}: example {example.name} is not valid JSON: {exc.msg}"
            ) from None


def _section_bounds(markdown: str, name: str) -> tuple[int, int]:
    begin = re.compile(rf"^<!-- BEGIN GENERATED: {re.escape(name)}\b[^\n]*-->\n", re.MULTILINE)
    end = re.compile(rf"^<!-- END GENERATED: {re.escape(name)} -->$", re.MULTILINE)
    begins, ends = list(begin.finditer(markdown)), list(end.finditer(markdown))
    if len(begins) != 1 or len(ends) != 1 or ends[0].start() < begins[0].end():
        raise SpecFormatError(
            f"generated section {name!r} needs exactly one BEGIN and one END marker, in order"
        )
    return begins[0].end(), ends[0].start()
