"""The documentation's tenants file, as written (once in the README): the `toml` blocks after the
`readme-tenants` markers of the tenants page and then of the billing webhooks page, joined, load with the
tenants loader, so a copied example is never refused by `check`."""

from __future__ import annotations

import re
from pathlib import Path

from a2a_x402.merchant.tenants import DEFAULT_TENANT, TenantRegistry

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- readme-tenants:"
# The pages holding the example's parts, in the order the parts join.
PAGES = (ROOT / "docs" / "concepts" / "tenants.md", ROOT / "docs" / "guides" / "webhooks.md")


def readme_tenants(readme: str, marker: str = MARKER) -> str:
    """The tenants examples of `readme` (pages' text) after `marker`, in order, as one TOML document."""
    blocks = []
    for after in readme.split(marker)[1:]:
        match = re.match(r"[^\n]*\n```toml\n(.*?)\n```", after, re.DOTALL)
        assert match, f"the line after {marker!r} must open a ```toml block"
        blocks.append(match[1])
    return "\n".join(blocks)


def test_the_readme_tenants_example_loads(tmp_path: Path) -> None:
    blocks = [readme_tenants(page.read_text()) for page in PAGES]
    assert all(blocks), "each page holds a part of the example"
    document = "\n".join(blocks)
    path = tmp_path / "tenants.toml"
    path.write_text(document)

    registry = TenantRegistry.from_toml(path)

    assert [tenant.id for tenant in registry] == [DEFAULT_TENANT, "acme"]
    acme = registry.require("acme")
    assert acme.price_for("text-stats") == 5000
    assert len(acme.webhook_endpoints) == 2  # webhook_url and the [[tenants.acme.webhooks]] one
    assert acme.api_token is not None and acme.accepts_api_token(acme.api_token)


def test_the_metered_skills_example_loads(tmp_path: Path) -> None:
    document = readme_tenants(PAGES[0].read_text(), "<!-- readme-metered:")
    path = tmp_path / "tenants.toml"
    path.write_text(document)

    acme = TenantRegistry.from_toml(path).require("acme")

    assert acme.is_metered("text-stats")
    assert acme.price_for("text-stats") == 500000
