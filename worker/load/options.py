"""Full-load options of one task instance, read from the task YAML (DM-compatible keys).

DM puts them in named top-level sections referenced from each instance:

    mydumpers: {global: {rows: 50000}}              # rows per chunk
    loaders:   {global: {on-duplicate-logical: error, pool-size: 8}}
    mysql-instances: [{source-id: s1, mydumper-config-name: global, loader-config-name: global}]

(``mydumper:`` / ``loader:`` inline under an instance work too).  ``coordinator.config``
accepts these keys but does not parse them yet, so they are read here from
``TaskConfig.source_text``.

``on-duplicate-logical`` (alias ``on-duplicate``): what a primary/unique-key collision between
shards does during the load.  ``error`` (our default; DM defaults to ``replace``) stops with
the colliding keys; ``replace`` keeps the row loaded last; ``ignore`` keeps the row loaded
first.  Which shard is "last" is not defined (chunks load in parallel), so both are for data
the user knows to be identical or disposable.
"""
from __future__ import annotations

from dataclasses import dataclass

import yaml

from coordinator.config import TaskConfig
from coordinator.errors import ConfigError

ON_DUPLICATE = ("error", "replace", "ignore")


@dataclass(frozen=True)
class LoadOptions:
    chunk_rows: int = 50_000        # target rows per chunk (``mydumpers.<n>.rows``)
    on_duplicate: str = "error"     # see module docstring
    pool_size: int = 0              # max concurrent chunk tasks; 0 = one Spark task per chunk
    batch_rows: int = 1_000         # rows per multi-row INSERT


def _section(root: dict, inst: dict, top: str, ref_key: str, inline_key: str, file: str, path: str) -> dict:
    out: dict = {}
    ref = inst.get(ref_key)
    if ref is not None:
        named = root.get(top) or {}
        if not isinstance(named, dict) or ref not in named:
            raise ConfigError(f"{ref_key} {ref!r} is not defined under `{top}`", file=file,
                              key=f"{path}.{ref_key}")
        out.update(named[ref] or {})
    if isinstance(inst.get(inline_key), dict):
        out.update(inst[inline_key])
    return out


def _int(d: dict, k: str, default: int, file: str, path: str, minimum: int) -> int:
    v = d.get(k, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"`{path}.{k}` must be an integer >= {minimum}, got {v!r}", file=file, key=f"{path}.{k}")
    return v


def load_options(task: TaskConfig, source_id: str, file: str = "<task>") -> LoadOptions:
    """The full-load options of ``source_id``'s instance (defaults when the YAML has none)."""
    try:
        root = yaml.safe_load(task.source_text or "") or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"task YAML cannot be re-read for loader options: {e}", file=file) from None
    insts = [i for i in (root.get("mysql-instances") or []) if isinstance(i, dict)]
    idx, inst = next(((n, i) for n, i in enumerate(insts) if i.get("source-id") == source_id), (0, {}))
    path = f"mysql-instances[{idx}]"
    dumper = _section(root, inst, "mydumpers", "mydumper-config-name", "mydumper", file, path)
    loader = _section(root, inst, "loaders", "loader-config-name", "loader", file, path)
    dup = loader.get("on-duplicate-logical", loader.get("on-duplicate", "error"))
    if dup not in ON_DUPLICATE:
        raise ConfigError(f"`on-duplicate-logical` must be one of {', '.join(ON_DUPLICATE)}, got {dup!r}; "
                          f"`error` reports colliding keys between shards, `replace`/`ignore` resolve them",
                          file=file, key=f"{path} loader.on-duplicate-logical")
    return LoadOptions(chunk_rows=_int(dumper, "rows", LoadOptions.chunk_rows, file, f"{path} mydumper", 1),
                       on_duplicate=dup,
                       pool_size=_int(loader, "pool-size", 0, file, f"{path} loader", 0),
                       batch_rows=_int(loader, "batch-rows", LoadOptions.batch_rows, file, f"{path} loader", 1))
