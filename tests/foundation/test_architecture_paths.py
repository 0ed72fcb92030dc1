"""docs/ARCHITECTURE.md is the newcomer's map: every path it names must exist.

A name with a slash is a path from the repository's root (a trailing slash: a directory); a bare
file name (``keeper.py``, ``lock-algorithm.md``) must be the name of some file in the tree."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_NAMED = re.compile(r"`([A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.-]+)*/?)`")   # not `.../info/...`
_FILE = re.compile(r"\.(py|md|ya?ml|toml|proto|sh|pyx|txt)$")


def _named_paths(text: str) -> set[str]:
    return {m for m in _NAMED.findall(text) if "/" in m or _FILE.search(m)}


def _tree_names() -> set[str]:
    skip = {".git", ".venv", ".services", "__pycache__", "shardmerge.egg-info"}
    return {p.name for p in ROOT.rglob("*") if not skip & set(p.relative_to(ROOT).parts)}


def test_every_path_the_architecture_map_names_exists():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    names = _tree_names()
    missing = []
    for n in sorted(_named_paths(text)):
        if "/" in n.rstrip("/"):
            p = ROOT / n.rstrip("/")
            if not (p.is_dir() if n.endswith("/") else p.exists()):
                missing.append(n)
        elif n.endswith("/"):
            if not any(d.is_dir() for d in ROOT.rglob(n.rstrip("/")) if ".venv" not in d.parts):
                missing.append(n)
        elif n not in names:
            missing.append(n)
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def test_the_check_sees_a_missing_path():
    assert _named_paths("see `coordinator/no_such.py` and `x.py`, not `a b` or `--flag`") == \
        {"coordinator/no_such.py", "x.py"}
    assert not (ROOT / "coordinator/no_such.py").exists()
