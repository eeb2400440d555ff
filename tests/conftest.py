pytest_plugins = ["tests.fixtures.chain"]
