"""A conformance kit for the A2A x402 payment extension: any merchant, black-box, every requirement of spec/.

Given a merchant's card URL, a chain RPC URL and a funded payer key, ``run_conformance`` discovers the
interfaces, extension versions and priced skill from the card and runs every check of ``CHECKS`` over each
binding and tenant the card lists (extension v0.3 on A2A 1.0, the v0.2 forms on A2A 0.3), verifying money
movements on chain. It sends only what a client could, treats every answer as untrusted (timeouts, size
caps, no redirects) and signs only for assets, networks and payTo addresses the card lists, never more than
the offered amount or ``KitSettings.max_amount``. Where the card declares the embedded flow (``params.ap2``,
§20), the ``ap2.*`` checks also present AP2 mandates, issued with ``KitSettings.ap2_issuer_key`` through the
AP2 SDK (an optional extra, imported by ``_ap2_sdk`` only); on A2A 0.3 the ``ap2.v02-*`` checks read the
v0.2 form's AP2 v0.1 carts and pay them with a ``PaymentMandate`` (§20.7).

* ``CHECKS`` / ``CheckSpec`` / ``Level`` / ``Scope`` -- the check catalogue (``_catalogue``)
* ``KitSettings`` / ``run_conformance`` -- one run (``_runner``)
* ``Report`` / ``CheckResult`` / ``Outcome`` -- what it found (``_report``)
* ``render_console`` / ``render_json`` / ``render_markdown`` / ``render_junit`` (``_render``)
* ``SCHEMA_DIR`` / ``SCHEMA_FILES`` -- the schemas the kit ships (``spec.build`` keeps them identical)
* ``cli.main`` -- the ``x402-a2a-conformance`` command
"""

from __future__ import annotations

from ._catalogue import CHECKS, CheckSpec, Level, Scope, check_spec
from ._render import render_console, render_json, render_junit, render_markdown
from ._report import CheckResult, Outcome, Report
from ._runner import KitSettings, run_conformance
from ._schema import SCHEMA_DIR, SCHEMA_FILES

__all__ = [
    "CHECKS",
    "SCHEMA_DIR",
    "SCHEMA_FILES",
    "CheckResult",
    "CheckSpec",
    "KitSettings",
    "Level",
    "Outcome",
    "Report",
    "Scope",
    "check_spec",
    "render_console",
    "render_json",
    "render_junit",
    "render_markdown",
    "run_conformance",
]
