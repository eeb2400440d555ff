pytest_plugins = ["tests.fixtures.chain", "tests.fixtures.servers", "tests.fixtures.facilitator", "tests.fixtures.merchant"]
