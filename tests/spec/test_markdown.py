"""`spec._markdown`: example blocks and generated sections of the specification's Markdown."""

from __future__ import annotations

import pytest

from spec import (
    SpecFormatError,
    generated_section,
    read_examples,
    render_example,
    replace_examples,
    replace_generated,
    section_anchors,
)

_DOC = """# Title

<!-- example: one.json (SendMessage request) -->
```json
{"a": 1}
```

Prose with a fence of another language:

```http
A2A-Version: 1.0
```

<!-- example: two.json (AgentCard) -->
```json
[1, 2]
```
"""


def test_reads_announced_blocks_in_order() -> None:
    examples = read_examples(_DOC)
    assert [(e.name, e.type, e.document) for e in examples] == [
        ("one.json", "SendMessage request", {"a": 1}),
        ("two.json", "AgentCard", [1, 2]),
    ]
    assert examples[0].line == 4
    assert _DOC[examples[1].start : examples[1].end] == "[1, 2]\n"


@pytest.mark.parametrize(
    ("markdown", "problem"),
    [
        ("```json\n{}\n```\n", "needs an example header"),
        ("<!-- example: a.json (AgentCard) -->\n\n```json\n{}\n```\n", "must be followed by a ```json fence"),
        ("<!-- example: a.json (AgentCard) -->\n```jsonc\n{}\n```\n", "must be followed by a ```json fence"),
        ("```jsonc\n{}\n```\n", "use ```json"),
        ("<!-- example: a.json (AgentCard) -->\n```json\n{}\n", "never closed"),
        (
            "<!-- example: a.json (AgentCard) -->\n```json\n{,}\n```\n",
            "line 3: example a.json is not valid JSON",
        ),
        (
            "<!-- example: a.json (AgentCard) -->\n```json\n{}\n```\n"
            "<!-- example: a.json (JWKS) -->\n```json\n{}\n```\n",
            "also at line 2",
        ),
    ],
    ids=["no-header", "gap", "wrong-language-after-header", "jsonc", "unclosed", "invalid", "repeated"],
)
def test_refuses_json_that_would_escape_the_checks(markdown: str, problem: str) -> None:
    with pytest.raises(SpecFormatError, match=problem):
        read_examples(markdown)


def test_other_fences_are_not_examples() -> None:
    assert read_examples("```text\n{not json}\n```\n\n```mermaid\nstateDiagram-v2\n```\n") == []


def test_replaces_named_blocks_only() -> None:
    replaced = replace_examples(_DOC, {"two.json": render_example([3])})
    assert [e.document for e in read_examples(replaced)] == [{"a": 1}, [3]]
    assert replaced.startswith(_DOC[: _DOC.index("[1, 2]")])


def test_render_example_is_canonical() -> None:
    assert render_example({"b": "é", "a": [1]}) == '{\n  "b": "é",\n  "a": [\n    1\n  ]\n}\n'


def test_generated_sections() -> None:
    markdown = "a\n<!-- BEGIN GENERATED: t (tool) -->\nold\n<!-- END GENERATED: t -->\nb\n"
    assert generated_section(markdown, "t") == "old\n"
    assert replace_generated(markdown, "t", "new\n") == markdown.replace("old", "new")


@pytest.mark.parametrize(
    "markdown",
    [
        "no markers\n",
        "<!-- END GENERATED: t -->\n<!-- BEGIN GENERATED: t -->\n",
        "<!-- BEGIN GENERATED: t -->\n<!-- BEGIN GENERATED: t -->\n<!-- END GENERATED: t -->\n",
    ],
    ids=["missing", "reversed", "repeated"],
)
def test_generated_section_needs_one_pair_of_markers(markdown: str) -> None:
    with pytest.raises(SpecFormatError, match="exactly one BEGIN and one END"):
        generated_section(markdown, "t")


def test_section_anchors_are_githubs_heading_anchors() -> None:
    markdown = (
        "## 1. Introduction\n\n### 4.3 Refusing a request without the extension\n\n"
        "## 13. Coexistence with v0.2\n"
    )
    assert section_anchors(markdown) == {
        "1": "1-introduction",
        "4.3": "43-refusing-a-request-without-the-extension",
        "13": "13-coexistence-with-v02",
    }
