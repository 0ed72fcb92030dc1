"""The forms ``start-task --start-time`` accepts (DM's two, with an optional zone) and the error
that names a bad one."""
from datetime import datetime, timezone

import pytest

from coordinator.master.errors import RequestError
from coordinator.master.start_time import parse_start_time

UTC_NOON = int(datetime(2021, 10, 21, 12, 0, 0, tzinfo=timezone.utc).timestamp())


@pytest.mark.parametrize("text,want", [
    ("2021-10-21 12:00:00Z", UTC_NOON),
    ("2021-10-21T12:00:00Z", UTC_NOON),
    ("2021-10-21T20:00:00+08:00", UTC_NOON),
    ("2021-10-21 07:30:00-04:30", UTC_NOON),
])
def test_zoned_forms(text, want):
    assert parse_start_time(text) == want


def test_without_a_zone_the_local_zone_counts():
    local = datetime(2021, 10, 21, 12, 0, 0).astimezone()
    assert parse_start_time("2021-10-21 12:00:00") == int(local.timestamp())


@pytest.mark.parametrize("text", ["yesterday", "2021-10-21", "2021-10-21 12:00", "2021-13-01 00:00:00",
                                  "2021-10-21 12:00:00 UTC"])
def test_bad_forms_are_named(text):
    with pytest.raises(RequestError) as e:
        parse_start_time(text)
    assert str(e.value).startswith(f"--start-time {text!r} is not a")
