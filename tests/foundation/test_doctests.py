"""The examples in the product code's docstrings run as tests (the test command collects this
module, so an example that stops being true fails CI).  Every module under ``coordinator/`` and
``worker/`` whose source holds an example is found, none listed by hand."""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _modules_with_examples() -> list[str]:
    out = []
    for pkg in ("coordinator", "worker"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            if ">>> " in p.read_text():
                out.append(".".join(p.relative_to(ROOT).with_suffix("").parts))
    return out


MODULES = _modules_with_examples()


def test_there_are_examples_to_run():
    assert "coordinator.schema.lattice" in MODULES and "coordinator.patterns" in MODULES, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (run it with -s)"
    assert result.attempted > 0
