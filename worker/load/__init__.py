"""Full load (task-mode ``all`` / ``full``): dump every routed shard table of one source in
parallel consistent-snapshot chunks on Spark, load the merged targets, and leave the binlog
checkpoint where the syncer continues exactly.  Entry point: :func:`run_full_load`;
docs/full-load.md explains the design and the correctness argument."""
from worker.load.chunk import ChunkError, KeyCollision, SchemaChangedDuringLoad
from worker.load.options import LoadOptions, load_options
from worker.load.progress import bar, format_progress
from worker.load.runner import (FullLoad, LoadError, LoadHooks, LoadResult, LoadStopped, TableLoad,
                                run_full_load)
from worker.load.snapshot import SnapshotError
from worker.load.store import LoadCheckpointError, LoadStore

__all__ = ["run_full_load", "FullLoad", "LoadResult", "TableLoad", "LoadHooks", "LoadOptions", "load_options",
           "LoadError", "LoadStopped", "ChunkError", "KeyCollision", "SchemaChangedDuringLoad", "SnapshotError",
           "LoadCheckpointError", "LoadStore", "bar", "format_progress"]
