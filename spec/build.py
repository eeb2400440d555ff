"""Keep the specification, its example files and its generated tables in step.

The Markdown (``v0.3.md``) is the source. ``python -m spec.build`` rewrites its example blocks in canonical
form, re-renders its generated tables from ``a2a_x402`` and the conformance kit's check list, writes every
example block to ``examples/<name>``, deletes example files the Markdown no longer has, and copies
``schema/`` into the kit (``a2a_x402/conformance/schema/``). ``--check`` changes nothing and exits 1 when
any of that would change something (run it in CI). ``--sign-card`` signs the Agent Card example with a fresh
throwaway key and replaces the JWK Set example with its public key; run it after editing the card.
``--ap2-v02-examples`` makes the two examples of the embedded flow's v0.2 form (§20.7) afresh with the
project's own code and throwaway keys, publishing the new public keys beside the §20 examples' (run it
after changing those examples or that code).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from a2a_x402.conformance import CHECKS, SCHEMA_FILES
from a2a_x402.conformance import SCHEMA_DIR as KIT_SCHEMA_DIR
from a2a_x402.extension import LITERAL_MAPPINGS, REASON_ERROR_CODES

from ._markdown import read_examples, render_example, replace_examples, replace_generated, section_anchors
from ._tables import render_check_table, render_migration_table, render_reason_table

__all__ = [
    "CARD_EXAMPLE",
    "EXAMPLES_DIR",
    "JWKS_EXAMPLE",
    "KIT_SCHEMA_DIR",
    "SCHEMA_DIR",
    "SPEC_DIR",
    "SPEC_PATH",
    "build",
    "main",
    "make_ap2_v02_examples",
    "render_spec",
    "sign_card_example",
]

SPEC_DIR = Path(__file__).resolve().parent
SPEC_PATH = SPEC_DIR / "v0.3.md"
EXAMPLES_DIR = SPEC_DIR / "examples"
SCHEMA_DIR = SPEC_DIR / "schema"
CARD_EXAMPLE = "agent-card.json"
JWKS_EXAMPLE = "jwks.json"
_CARD_JKU = "https://merchant.example/.well-known/jwks.json"


def render_spec(markdown: str) -> str:
    """``markdown`` with canonical example blocks and freshly rendered generated tables.

    Raises:
        spec.SpecFormatError: the Markdown breaks the example or generated-section rules.
    """
    canonical = {example.name: render_example(example.document) for example in read_examples(markdown)}
    markdown = replace_examples(markdown, canonical)
    markdown = replace_generated(markdown, "migration-table", render_migration_table(LITERAL_MAPPINGS))
    markdown = replace_generated(
        markdown, "conformance-checks", render_check_table(CHECKS, section_anchors(markdown))
    )
    return replace_generated(markdown, "reason-table", render_reason_table(REASON_ERROR_CODES))


def build(
    spec_path: Path = SPEC_PATH,
    examples_dir: Path = EXAMPLES_DIR,
    *,
    check: bool,
    schema_dir: Path = SCHEMA_DIR,
    kit_schema_dir: Path = KIT_SCHEMA_DIR,
) -> list[str]:
    """Bring the Markdown, the example files and the kit's schema copies in step; with ``check``, only report
    what differs.

    Returns:
        One line per file that was (or, with ``check``, would be) written or deleted; empty when all is
        in step.

    Raises:
        spec.SpecFormatError: the Markdown breaks the example or generated-section rules.
    """
    changes: list[str] = []
    markdown = spec_path.read_text(encoding="utf-8")
    rendered = render_spec(markdown)
    if rendered != markdown:
        changes.append(f"{spec_path.name}: example blocks or generated tables are not up to date")
        if not check:
            spec_path.write_text(rendered, encoding="utf-8")
    expected = {example.name: example.text for example in read_examples(rendered)}
    for name, text in expected.items():
        path = examples_dir / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            changes.append(f"examples/{name}: differs from its block in {spec_path.name}")
            if not check:
                examples_dir.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    for path in sorted(examples_dir.glob("*.json")) if examples_dir.is_dir() else ():
        if path.name not in expected:
            changes.append(f"examples/{path.name}: no block in {spec_path.name} has this name")
            if not check:
                path.unlink()
    changes += _sync_kit_schemas(schema_dir, kit_schema_dir, check=check)
    return changes


def _sync_kit_schemas(schema_dir: Path, kit_schema_dir: Path, *, check: bool) -> list[str]:
    # The conformance kit installs with the schemas it validates against: copies of these, byte for byte.
    changes = []
    names = sorted(path.name for path in schema_dir.glob("*.json"))
    if names != sorted(SCHEMA_FILES):
        changes.append(f"schema/: {names} is not the kit's SCHEMA_FILES {sorted(SCHEMA_FILES)}")
    for name in names:
        source, copy = schema_dir / name, kit_schema_dir / name
        if not copy.is_file() or copy.read_bytes() != source.read_bytes():
            changes.append(f"a2a_x402/conformance/schema/{name}: differs from schema/{name}")
            if not check:
                copy.write_bytes(source.read_bytes())
    return changes


def sign_card_example(spec_path: Path = SPEC_PATH) -> None:
    """Sign the Agent Card example with a new ES256 key and publish the key in the JWK Set example.

    The private key exists only in memory: the examples show a signature anyone can verify, not a key
    anyone can sign with.
    """
    # Imported here: only this maintenance command needs the signing library.
    from a2a_x402.agentcard import generate_signing_key, sign_card

    markdown = spec_path.read_text(encoding="utf-8")
    examples = {example.name: example.document for example in read_examples(markdown)}
    key = generate_signing_key("ES256")
    card = sign_card(examples[CARD_EXAMPLE], [key], jku=_CARD_JKU)
    texts = {CARD_EXAMPLE: render_example(card), JWKS_EXAMPLE: render_example({"keys": [key.public_jwk()]})}
    spec_path.write_text(replace_examples(markdown, texts), encoding="utf-8")


def make_ap2_v02_examples(spec_path: Path = SPEC_PATH) -> None:
    """Make the §20.7 examples afresh (``spec._ap2_v02``); the private keys exist only in memory."""
    # Imported here: only this maintenance command needs the merchant's, the payer's and the AP2 SDK's code.
    from ._ap2_v02 import make_ap2_v02_examples as make

    spec_path.write_text(make(spec_path.read_text(encoding="utf-8")), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m spec.build", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if anything is stale")
    parser.add_argument("--sign-card", action="store_true", help="re-sign the Agent Card example first")
    parser.add_argument(
        "--ap2-v02-examples",
        action="store_true",
        help="make the §20.7 examples afresh first (throwaway keys)",
    )
    options = parser.parse_args(argv)
    if (options.sign_card or options.ap2_v02_examples) and options.check:
        parser.error("--sign-card and --ap2-v02-examples change the specification; not with --check")
    if options.sign_card:
        sign_card_example()
    if options.ap2_v02_examples:
        make_ap2_v02_examples()
    changes = build(check=options.check)
    for change in changes:
        print(change, file=sys.stderr if options.check else sys.stdout)
    if options.check and changes:
        print("run `python -m spec.build` to bring them in step", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
