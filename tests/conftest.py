import pytest

LOAD_FIGURES = "load figures"
"""The user property under which a load test records its throughput and latency line."""

pytest_plugins = [
    "pytester",
    "tests.fixtures.error_logs",
    "tests.fixtures.forked",
    "tests.fixtures.chain",
    "tests.fixtures.servers",
    "tests.fixtures.facilitator",
    "tests.fixtures.merchant",
    "tests.fixtures.compat",
    "tests.fixtures.node",
    "tests.fixtures.peer_nodes",
    "tests.fixtures.fiat_token",
    "tests.fixtures.browser",
    "tests.fixtures.conformance",
    "tests.fixtures.commands",
    "tests.fixtures.jwt_issuer",
    "tests.fixtures.checks",
    "tests.fixtures.docs",
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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Show the figures the load tests recorded, whether or not their output was captured.

    Here, not beside the load tests: with parallel workers only this conftest is loaded where the summary
    is written.
    """
    lines = [
        f"{report.nodeid.rsplit('::', 1)[-1]}: {value}"
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        for name, value in getattr(report, "user_properties", [])
        if name == LOAD_FIGURES
    ]
    if lines:
        terminalreporter.write_sep("=", LOAD_FIGURES)
        for line in lines:
            terminalreporter.write_line(line)
