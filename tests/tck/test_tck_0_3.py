"""The A2A 0.3 TCK, unpatched, mandatory category, on JSON-RPC and on REST, at the merchant's root and at
a named tenant's URLs (see `conftest`).

Every TCK failure must be one listed in `expected_disagreements_0_3.toml`, where each entry names the TCK
test, the transport, the 0.3 spec clause and why the TCK is wrong there; a listed test that no longer fails
must leave the file. The list is the same at the root and at the tenant's URLs: a tenant's 0.3 root is the
same endpoints with the URL as the tenant, so every TCK test must end there as it ends at the root. The
reference for the figures is a2a-sdk 0.3.26's own server around the TCK's own Python SUT
(../shared/peers/README.md): 26 passed on JSON-RPC, 16 on REST.

Marked `alone`, as the 1.0 TCK: its checks wait on the server with short timeouts, which a machine shared
with the parallel run can miss.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from a2a_x402.merchant.edge import AGENT_CARD_PATH, JSONRPC_PATH, REST_PATH

from .conftest import ROOTS_0_3, TENANT_0_3, TRANSPORTS_0_3, TckOutcome, TckRun, TckRunsV0_3

pytestmark = [pytest.mark.alone, pytest.mark.timeout(2700)]

DISAGREEMENTS_FILE = Path(__file__).with_name("expected_disagreements_0_3.toml")
REFERENCE_PASSED = {"jsonrpc": 26, "rest": 16}
"""What a2a-sdk 0.3.26 around the TCK's Python SUT passes in the mandatory category, by transport."""


@dataclass(frozen=True, slots=True)
class Disagreement:
    """A 0.3 TCK test this project fails on one transport on purpose: the TCK is wrong there."""

    test: str
    transport: str
    clause: str
    why: str


def load_disagreements(path: Path = DISAGREEMENTS_FILE) -> list[Disagreement]:
    """The entries of the expected-disagreements file (none when it lists none)."""
    with path.open("rb") as handle:
        document = tomllib.load(handle)
    return [Disagreement(**entry) for entry in document.get("disagreement", [])]


def case_id(outcome: TckOutcome) -> str:
    """The id a disagreement names: the TCK's JUnit class name and test name."""
    return f"{outcome.classname}::{outcome.name}"


def _failing(run: TckRun) -> list[TckOutcome]:
    return [o for o in run.outcomes if o.result in ("failed", "error")]


def _results(run: TckRun) -> dict[str, str]:
    return {case_id(o): o.result for o in run.outcomes}


def _listing(outcomes: list[TckOutcome]) -> str:
    return "\n".join(
        f"- {case_id(o)} ({o.result}): {o.detail.splitlines()[0] if o.detail else ''}" for o in outcomes
    )


def test_every_disagreement_names_the_test_the_transport_the_clause_and_why() -> None:
    entries = load_disagreements()

    assert len({(entry.test, entry.transport) for entry in entries}) == len(entries), "a test is listed twice"
    for entry in entries:
        assert entry.test.startswith("tests.mandatory.") and "::test_" in entry.test, entry
        assert entry.transport in TRANSPORTS_0_3, entry
        assert entry.clause.strip() and len(entry.why.split()) >= 20, entry


@pytest.mark.parametrize("root", ROOTS_0_3)
def test_the_tck_read_the_card_of_the_root_it_was_pointed_at(tck_0_3_runs: TckRunsV0_3, root: str) -> None:
    sut_url = tck_0_3_runs.sut_urls[root]
    prefix = urlsplit(sut_url).path.removesuffix(JSONRPC_PATH)

    # Where the TCK reads the card: the well-known path of its URL's origin.
    card = httpx.get(urljoin(sut_url, AGENT_CARD_PATH)).json()

    interfaces = {urlsplit(interface["url"]).path for interface in card["additionalInterfaces"]}
    assert (urlsplit(card["url"]).path, interfaces) == (
        prefix + JSONRPC_PATH,
        {prefix + JSONRPC_PATH, prefix + REST_PATH},
    )


@pytest.mark.parametrize("root", ROOTS_0_3)
@pytest.mark.parametrize("transport", TRANSPORTS_0_3)
def test_the_tck_ran_on_the_transport(tck_0_3_runs: TckRunsV0_3, transport: str, root: str) -> None:
    run = tck_0_3_runs.runs[root, transport]

    assert run.named("passed"), run.output[-3000:]


@pytest.mark.parametrize("root", ROOTS_0_3)
@pytest.mark.parametrize("transport", TRANSPORTS_0_3)
def test_no_tck_failure_outside_the_expected_disagreements(
    tck_0_3_runs: TckRunsV0_3, transport: str, root: str
) -> None:
    expected = {entry.test for entry in load_disagreements() if entry.transport == transport}

    unexpected = [o for o in _failing(tck_0_3_runs.runs[root, transport]) if case_id(o) not in expected]

    assert not unexpected, (
        f"{root}, {transport}: TCK failures not in {DISAGREEMENTS_FILE.name}:\n{_listing(unexpected)}"
    )


@pytest.mark.parametrize("root", ROOTS_0_3)
@pytest.mark.parametrize("transport", TRANSPORTS_0_3)
def test_every_expected_disagreement_still_fails(
    tck_0_3_runs: TckRunsV0_3, transport: str, root: str
) -> None:
    failing = {case_id(o) for o in _failing(tck_0_3_runs.runs[root, transport])}

    stale = [e.test for e in load_disagreements() if e.transport == transport and e.test not in failing]

    assert not stale, (
        f"{root}, {transport}: no longer failing, remove from {DISAGREEMENTS_FILE.name}: {stale}"
    )


@pytest.mark.parametrize("root", ROOTS_0_3)
@pytest.mark.parametrize("transport", TRANSPORTS_0_3)
def test_at_least_as_many_passes_as_the_reference_server(
    tck_0_3_runs: TckRunsV0_3, transport: str, root: str
) -> None:
    run = tck_0_3_runs.runs[root, transport]
    figures = {result: len(run.named(result)) for result in ("passed", "failed", "error", "skipped")}

    assert figures["passed"] >= REFERENCE_PASSED[transport], figures


@pytest.mark.parametrize("transport", TRANSPORTS_0_3)
def test_every_tck_test_ends_at_the_tenants_urls_as_at_the_root(
    tck_0_3_runs: TckRunsV0_3, transport: str
) -> None:
    at_root = _results(tck_0_3_runs.runs["root", transport])
    at_tenant = _results(tck_0_3_runs.runs[TENANT_0_3, transport])

    differing = sorted(
        name for name in at_root.keys() | at_tenant.keys() if at_root.get(name) != at_tenant.get(name)
    )

    assert not differing, [(name, at_root.get(name), at_tenant.get(name)) for name in differing]
