"""The DM-derived scenarios run on the end-to-end harness: real `shardctl master` + 2 workers."""
from tests.e2e.conftest import cluster, scenario  # noqa: F401 — fixtures shared with tests/e2e
