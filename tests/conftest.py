import pytest

pytest_plugins = [
    "tests.fixtures.chain",
    "tests.fixtures.servers",
    "tests.fixtures.facilitator",
    "tests.fixtures.merchant",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--soak`: also run the long soak/load tests (marked `soak`), which are skipped otherwise."""
    parser.addoption("--soak", action="store_true", default=False, help="run the long soak/load tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked `soak` unless `--soak` was given."""
    if config.getoption("--soak"):
        return
    skip = pytest.mark.skip(reason="a soak run: enable it with --soak")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)
