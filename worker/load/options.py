"""Full-load options of one task instance: parsed and validated by ``coordinator.config``
(``load_options``) so start-task rejects bad values; re-exported here for the loader."""
from coordinator.config import ON_DUPLICATE, LoadOptions, load_options

__all__ = ["ON_DUPLICATE", "LoadOptions", "load_options"]
