"""The binlog reader registry and the config agree on the reader names."""
import pytest

from coordinator.config import BINLOG_READERS
from worker.binlog import READERS, make_reader


def test_registry_and_config_name_the_same_readers():
    assert set(READERS) == set(BINLOG_READERS)


def test_unknown_reader_names_the_known_ones():
    with pytest.raises(KeyError, match="'kafka' is unknown; use one of process, spark"):
        make_reader("kafka", None, "s1")
