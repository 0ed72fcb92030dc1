"""The preview's cluster tests reuse the e2e harness (a real master and one worker per source)."""
from tests.e2e.conftest import cluster, scenario  # noqa: F401 — fixtures
