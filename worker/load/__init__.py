"""Full load (task-mode ``all`` / ``full``): dump every routed shard table of one source in
parallel consistent-snapshot chunks on Spark, load the merged targets, and leave the binlog
checkpoint where the syncer continues exactly.  Entry point: :func:`run_full_load`;
docs/full-load.md explains the design and the correctness argument.

The names below are imported on first use (PEP 562): a Spark task that runs
``worker.load.chunk.load_partition`` imports this package, and importing the driver's side with
it (runner, targets: the schema model and sqlglot) cost each fresh Python worker ~0.3 s of CPU
in the first load, more than the load of a 5,000-row chunk."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_WHERE = {
    "ChunkError": "chunk", "KeyCollision": "chunk", "SchemaChangedDuringLoad": "chunk",
    "LoadOptions": "options", "load_options": "options",
    "bar": "progress", "format_progress": "progress",
    "FullLoad": "runner", "LoadError": "runner", "LoadHooks": "runner", "LoadResult": "runner",
    "LoadStopped": "runner", "TableLoad": "runner", "run_full_load": "runner",
    "SnapshotError": "snapshot", "LoadCheckpointError": "store", "LoadStore": "store",
}

__all__ = ["run_full_load", "FullLoad", "LoadResult", "TableLoad", "LoadHooks", "LoadOptions", "load_options",
           "LoadError", "LoadStopped", "ChunkError", "KeyCollision", "SchemaChangedDuringLoad", "SnapshotError",
           "LoadCheckpointError", "LoadStore", "bar", "format_progress"]

if TYPE_CHECKING:
    from worker.load.chunk import ChunkError, KeyCollision, SchemaChangedDuringLoad
    from worker.load.options import LoadOptions, load_options
    from worker.load.progress import bar, format_progress
    from worker.load.runner import (FullLoad, LoadError, LoadHooks, LoadResult, LoadStopped, TableLoad,
                                    run_full_load)
    from worker.load.snapshot import SnapshotError
    from worker.load.store import LoadCheckpointError, LoadStore


def __getattr__(name: str):
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'worker.load' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"worker.load.{mod}"), name)
    globals()[name] = value
    return value
