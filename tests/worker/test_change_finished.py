"""Checkpoint rule 8b for a multi-change ALTER coordinated one change at a time: which changes of
the statement an intent record says are finished (pure: ``worker.sync.ddl_intent.change_finished``)."""
import pytest

from worker.sync.ddl_intent import change_finished


@pytest.mark.parametrize("intent, change, finished", [
    ({"finished": True}, None, True),                       # a statement handled whole
    ({"before": "x"}, None, False),                         # ... being run, not finished
    ({"finished": True, "change": 1}, None, False),         # a change's record is not the statement's
    ({"finished": True}, 0, False),                         # a whole statement's record says nothing of changes
    ({"finished": True, "change": 1}, 0, True),             # change 1 finished: 0 and 1 are
    ({"finished": True, "change": 1}, 1, True),
    ({"finished": True, "change": 1}, 2, False),
    ({"change": 2, "done": 2, "before": "x"}, 1, True),     # change 2 running: 0 and 1 finished
    ({"change": 2, "done": 2, "before": "x"}, 2, False),    # ... but not 2 itself
    ({"change": 0, "done": 0, "before": "x"}, 0, False),
])
def test_which_changes_an_intent_record_says_are_finished(intent, change, finished):
    assert change_finished(intent, change) is finished
