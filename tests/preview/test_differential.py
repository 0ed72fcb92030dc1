"""The short form of the preview's differential test (``python -m tests.preview`` is the long
one): a few generated DDL sequences previewed as a rollout, then run for real on a running task;
the preview must agree with reality after every step (downstream structure, held and conflicting
tables, worker errors, lock open or resolved)."""
from __future__ import annotations

import pytest

from tests.preview.differential import Differential, make_sequence

# seeds of the short form: a rename mixed with DROP+ADD (conflict or held), widen-then-drop, index
SEEDS = (3, 11)


@pytest.mark.parametrize("seed", SEEDS)
def test_preview_agrees_with_reality(cluster, services, tmp_path, seed):
    out = Differential(cluster, services, tmp_path).run(make_sequence(seed))
    assert out.ok and out.steps > 0, f"{out.ended}: {out.detail}\n" + "\n".join(out.log)
