"""Running schemathesis against a live server: every operation of a document, in both generation modes.

`fuzz_operations` first sends each explicit example of an operation (its request body's `examples`: the
requests the caller wants sent on every run, whatever the draws), then draws cases for it with Hypothesis
(positive mode: requests that match the document; negative mode: requests that break it). It sends each
to the server at `base_url` over real HTTP, applies schemathesis' `not_a_server_error` check, and hands
every (case, response) to `after` for the caller's own checks (state unchanged, ...). It returns how many
requests each status code got. A caller may fuzz a part of the document (the operations whose path it
picks): the draws of an operation are the same whatever else is fuzzed, as generation is derandomized.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from hypothesis.strategies import SearchStrategy
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err
from schemathesis.core.transport import Response

__all__ = ["AnyCase", "fuzz_operations"]

AnyCase = Case[APIOperation[Any, Any, Any, Any]]
"""A generated case of any operation."""
AfterCall = Callable[[AnyCase, Response], None]
_TIMEOUT_S = 30.0


def _send_drawn(
    strategy: SearchStrategy[AnyCase], max_examples: int, send: Callable[[AnyCase], None]
) -> None:
    """`send` each of `max_examples` cases drawn from `strategy` (fewer if it has fewer)."""

    # Generate only (no shrinking, no example database): a failure is reported with its curl command, and
    # shrinking would replay requests against state the run has changed. Derandomized, so a CI run is
    # reproducible: the same requests every time.
    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(case: AnyCase) -> None:
        send(case)

    run()


def fuzz_operations(
    document: Mapping[str, Any],
    base_url: str,
    *,
    max_examples: int,
    headers: Mapping[str, str] | None = None,
    after: AfterCall | None = None,
    modes: tuple[GenerationMode, ...] = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE),
    paths: Callable[[str], bool] = lambda _: True,
) -> Counter[int]:
    """Fuzz every operation of the OpenAPI `document` whose path `paths` accepts (all by default) against
    `base_url`; returns a count per HTTP status.

    Raises:
        AssertionError (or schemathesis' failure) at the first server error or failed `after` check,
        with the request to reproduce it.
    """
    schema = schemathesis.openapi.from_dict(dict(document))
    statuses: Counter[int] = Counter()
    with requests.Session() as session:

        def send(case: AnyCase) -> None:
            response = case.call(
                base_url=base_url, session=session, headers=dict(headers or {}), timeout=_TIMEOUT_S
            )
            statuses[response.status_code] += 1
            case.validate_response(response, checks=[not_a_server_error])
            if after is not None:
                after(case, response)

        for result in schema.get_all_operations():
            if isinstance(result, Err):
                raise AssertionError(f"the document is not valid OpenAPI: {result.err()}")
            operation = result.ok()
            if not paths(operation.path):
                continue
            # One case each: an example's missing parameters (a path's tenant) are drawn.
            for example in operation.get_strategies_from_examples():
                _send_drawn(example, 1, send)
            has_inputs = any(name in operation.definition.raw for name in ("parameters", "requestBody"))
            # An operation without parameters or body has nothing negative mode could break.
            for mode in modes if has_inputs else (GenerationMode.POSITIVE,):
                try:
                    _send_drawn(operation.as_strategy(generation_mode=mode), max_examples, send)
                except Unsatisfiable:
                    # Negative mode cannot break some parameters (a path segment that takes any string).
                    if mode is not GenerationMode.NEGATIVE:
                        raise
    return statuses
