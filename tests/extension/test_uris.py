from __future__ import annotations

import pytest

from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V01, EXTENSION_URI_V02, Dialect, negotiate_dialect

UNKNOWN = "https://example.com/extensions/other/v1"


def test_uris_are_the_published_ones() -> None:
    assert EXTENSION_URI == "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.3"
    assert EXTENSION_URI_V02 == "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2"
    assert EXTENSION_URI_V01 == "https://github.com/google-a2a/a2a-x402/v0.1"


@pytest.mark.parametrize(
    ("requested", "version", "expected"),
    [
        # A2A 1.0 speaks only v0.3.
        ({EXTENSION_URI}, "1.0", Dialect.V03),
        ({EXTENSION_URI, UNKNOWN}, "1.0", Dialect.V03),
        ({EXTENSION_URI}, "1.7", Dialect.V03),
        ({EXTENSION_URI}, " 1.0 ", Dialect.V03),
        ({EXTENSION_URI}, "1.0.2", Dialect.V03),
        ({EXTENSION_URI_V02}, "1.0", None),
        ({EXTENSION_URI_V01}, "1.0", None),
        ({EXTENSION_URI_V02, EXTENSION_URI_V01}, "1.0", None),
        # A2A 0.3 speaks v0.2, and takes the v0.1 URI as v0.2.
        ({EXTENSION_URI_V02}, "0.3", Dialect.V02),
        ({EXTENSION_URI_V01}, "0.3", Dialect.V02),
        ({EXTENSION_URI_V02, EXTENSION_URI}, "0.3", Dialect.V02),
        ({EXTENSION_URI}, "0.3", None),
        # A missing or empty A2A-Version means 0.3.
        ({EXTENSION_URI_V02}, None, Dialect.V02),
        ({EXTENSION_URI_V02}, "", Dialect.V02),
        ({EXTENSION_URI}, None, None),
        # Nothing requested, or only unknown URIs.
        (set(), "1.0", None),
        ({UNKNOWN}, "1.0", None),
        ({UNKNOWN}, "0.3", None),
        # Near misses of the URI are unknown URIs, not another version.
        ({EXTENSION_URI + "/"}, "1.0", None),
        ({EXTENSION_URI.upper()}, "1.0", None),
        ({EXTENSION_URI.replace("v0.3", "v0.4")}, "1.0", None),
        # Protocol versions without a dialect.
        ({EXTENSION_URI, EXTENSION_URI_V02}, "2.0", None),
        ({EXTENSION_URI, EXTENSION_URI_V02}, "0.2", None),
        ({EXTENSION_URI, EXTENSION_URI_V02}, "one", None),
        ({EXTENSION_URI, EXTENSION_URI_V02}, "1", None),
    ],
)
def test_negotiate_dialect(requested: set[str], version: str | None, expected: Dialect | None) -> None:
    assert negotiate_dialect(requested, version) is expected


def test_negotiate_dialect_accepts_any_iterable_and_trims() -> None:
    assert negotiate_dialect([f" {EXTENSION_URI} "], "1.0") is Dialect.V03
    assert negotiate_dialect(iter([EXTENSION_URI_V02]), "0.3") is Dialect.V02


def test_dialect_properties() -> None:
    assert (Dialect.V03.uri, Dialect.V03.a2a_version) == (EXTENSION_URI, "1.0")
    assert (Dialect.V02.uri, Dialect.V02.a2a_version) == (EXTENSION_URI_V02, "0.3")
    assert [d.value for d in Dialect] == ["v0.3", "v0.2"]
