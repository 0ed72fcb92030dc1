"""The DM-derived scenarios with MySQL upstreams: two MySQL 9.7 sources (``mysql1``, ``mysql2``),
and a mixed task (MySQL and MariaDB sources merged into one target), and MySQL as the merged
downstream, on real processes.

DM's cases come from MySQL; here they run in their original form against a real MySQL server
(scripts/devservices.py's MySQL set).  The CI run takes 40 cases with two MySQL sources (DM's ALTER INDEX
... VISIBLE/INVISIBLE cases in their MySQL form and cases spread over the registry, fixed by
position), five mixed and two into a MySQL downstream; ``SHARDMERGE_MYSQL_CASES=all`` (``scripts/test-mysql``) runs every case on the two MySQL sources.
"""
from __future__ import annotations

import contextlib
import os

import pytest

from tests.e2e.conftest import Cluster, Scenario
from tests.support.cluster import running

from .case import Case
from .registry import CASES
from .test_dm_cases import run_case

ALL = os.environ.get("SHARDMERGE_MYSQL_CASES", "") == "all"
RUNNABLE = tuple(c for c in CASES if not c.mariadb_only)
# CI: 40 cases spread over the registry (every other one, the first 40), and DM's MySQL-only
# ALTER INDEX ... VISIBLE/INVISIBLE cases in their own form
_FORMS = tuple(c for c in RUNNABLE if c.mysql_forms)
_SPREAD = tuple(c for c in RUNNABLE[::2] if c not in _FORMS)[:40 - len(_FORMS)]
# and cases of ours whose MySQL form matters (row events name their columns there too)
_OURS = ("renames_in_opposite_orders_across_statements_with_rows_between",)
MYSQL_CASES = RUNNABLE if ALL else tuple(c for c in RUNNABLE if c in _SPREAD or c in _FORMS or c.name in _OURS)
# Cases whose statements only MySQL and MariaDB both take; the mixed task runs these.
_MIXED = ("add_column_on_two_sources_with_writes_between", "dm046_drop_a_column_on_every_shard",
          "dm050_rename_one_column_to_two_names", "dm062_widen_the_key_to_bigint",
          "dm105_add_two_indexes_in_opposite_orders")
MIXED_CASES = tuple(c for c in CASES if c.name in _MIXED)


def _scenario_factory(cluster, dbs: dict, down, tmp_path):
    made: list[Scenario] = []

    def make(**kw) -> Scenario:
        s = Scenario(cluster, dbs, down, tmp_path, **kw)
        made.append(s)
        return s
    return make, made


def _cleanup(cluster, made) -> None:
    for s in made:
        s.stop_writers()
        with contextlib.suppress(Exception):
            cluster.ctl("stop-task", s.name)
    cluster.task_name = ""


def _cluster(services, etcd_client, tmp_path_factory, name: str, sources: dict):
    """A module's cluster: master + a worker per source, the sources on the named dev servers."""
    with running(lambda prefix, work: Cluster(services, prefix, work, sources=sources),
                 etcd_client, name, tmp_path_factory.mktemp(name)) as c:
        yield c


# ----------------------------------------------------------------------------- two MySQL sources
@pytest.fixture(scope="module")
def mysql_cluster(services, etcd_client, tmp_path_factory):
    yield from _cluster(services, etcd_client, tmp_path_factory, "e2e-mysql", {"s1": "mysql1", "s2": "mysql2"})


@pytest.fixture
def mysql_scenario(mysql_cluster, mysql1_db, mysql2_db, downstream_db, tmp_path):
    make, made = _scenario_factory(mysql_cluster, {"s1": mysql1_db, "s2": mysql2_db}, downstream_db, tmp_path)
    yield make
    _cleanup(mysql_cluster, made)


@pytest.mark.parametrize("case", MYSQL_CASES, ids=[c.name for c in MYSQL_CASES])
def test_dm_case_on_two_mysql_sources(mysql_scenario, case: Case):
    run_case(mysql_scenario, case)


# ----------------------------------------------------------------------------- MySQL + MariaDB
@pytest.fixture(scope="module")
def mixed_cluster(services, etcd_client, tmp_path_factory):
    yield from _cluster(services, etcd_client, tmp_path_factory, "e2e-mixed", {"s1": "mysql1", "s2": "source2"})


@pytest.fixture
def mixed_scenario(mixed_cluster, mysql1_db, source2_db, downstream_db, tmp_path):
    make, made = _scenario_factory(mixed_cluster, {"s1": mysql1_db, "s2": source2_db}, downstream_db, tmp_path)
    yield make
    _cleanup(mixed_cluster, made)


@pytest.mark.parametrize("case", MIXED_CASES, ids=[c.name for c in MIXED_CASES])
def test_dm_case_on_a_mysql_and_a_mariadb_source(mixed_scenario, case: Case):
    run_case(mixed_scenario, case)


# ----------------------------------------------------------------------------- a MySQL downstream
@pytest.fixture
def mysql_down_scenario(mysql_cluster, mysql1_db, mysql2_db, mysql_downstream_db, tmp_path):
    """Two MySQL sources merged into a MySQL downstream (checkpoints and meta tables there too)."""
    make, made = _scenario_factory(mysql_cluster, {"s1": mysql1_db, "s2": mysql2_db}, mysql_downstream_db, tmp_path)
    yield make
    _cleanup(mysql_cluster, made)


MYSQL_DOWN_CASES = tuple(c for c in CASES if c.name in _MIXED[:2])


@pytest.mark.parametrize("case", MYSQL_DOWN_CASES, ids=[c.name for c in MYSQL_DOWN_CASES])
def test_dm_case_into_a_mysql_downstream(mysql_down_scenario, case: Case):
    run_case(mysql_down_scenario, case)
