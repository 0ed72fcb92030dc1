"""Shared fixtures: the real local services (etcd, 2 upstream + 1 downstream MariaDB) and one
Spark session for the whole run.  Services are started (or reused) through scripts/services;
if one cannot start, the tests that need it fail with the reason — never a silent skip."""
from __future__ import annotations

import importlib.util
import re
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_devservices():
    spec = importlib.util.spec_from_file_location("devservices", ROOT / "scripts" / "devservices.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["devservices"] = mod  # dataclasses look their module up while defining
    spec.loader.exec_module(mod)
    return mod


devservices = _load_devservices()


@dataclass
class Services:
    etcd: str             # "host:port"
    mysql: dict           # name -> {host, port, user, password}

    @property
    def etcd_host(self) -> str:
        return self.etcd.rsplit(":", 1)[0]

    @property
    def etcd_port(self) -> int:
        return int(self.etcd.rsplit(":", 1)[1])


@pytest.fixture(scope="session")
def services() -> Services:
    try:
        info = devservices.start()
    except Exception as e:  # ServiceError or an OS error: say which service and why
        pytest.fail(f"local services could not start (scripts/services start): {e}", pytrace=False)
    return Services(etcd=info["etcd"], mysql=_Servers(info["mysql"]))


class _Servers(dict):
    """The services set's database servers by name; a server left out of the set fails the test
    with the reason instead of a bare KeyError."""

    def __missing__(self, name: str):
        hint = (" (SHARDMERGE_SERVICES_MYSQL=0 leaves the MySQL servers out: unset it and run "
                "scripts/services start)" if name.startswith("mysql") else "")
        pytest.fail(f"database server {name!r} is not in this services set ({', '.join(self)}){hint}",
                    pytrace=False)


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@dataclass
class Database:
    """A fresh database on one MariaDB server, dropped when the test ends."""
    server: str
    name: str
    params: dict

    def connect(self, db: str | None = "", **kw) -> pymysql.connections.Connection:
        return pymysql.connect(**self.params, database=self.name if db == "" else db,
                               autocommit=True, charset="utf8mb4", **kw)

    def execute(self, sql: str, args=None) -> list[tuple]:
        with self.connect() as c, c.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())


def _fresh_db(services: Services, server: str, request) -> Database:
    safe = re.sub(r"\W", "_", request.node.name)[:20].lower()
    db = Database(server, _unique(f"t_{safe}"), dict(services.mysql[server]))
    with pymysql.connect(**db.params, autocommit=True) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db.name}`")
    return db


def _drop_db(db: Database) -> None:
    with pymysql.connect(**db.params, autocommit=True) as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db.name}`")


@pytest.fixture
def downstream_db(services, request):
    db = _fresh_db(services, "downstream", request)
    yield db
    _drop_db(db)


@pytest.fixture
def source1_db(services, request):
    db = _fresh_db(services, "source1", request)
    yield db
    _drop_db(db)


@pytest.fixture
def source2_db(services, request):
    db = _fresh_db(services, "source2", request)
    yield db
    _drop_db(db)


@pytest.fixture
def mysql1_db(services, request):
    """A fresh database on the first MySQL upstream (scripts/devservices.py's MySQL set)."""
    db = _fresh_db(services, "mysql1", request)
    yield db
    _drop_db(db)


@pytest.fixture
def mysql2_db(services, request):
    db = _fresh_db(services, "mysql2", request)
    yield db
    _drop_db(db)


@pytest.fixture
def mysql_downstream_db(services, request):
    db = _fresh_db(services, "mysql-downstream", request)
    yield db
    _drop_db(db)


@pytest.fixture(scope="session")
def private_mysql_server(services):
    """Connection params of a MySQL server (binlog, GTID on) private to this test run, for
    what must not touch the shared ones: ``gtid_mode`` steps, purged binlogs.  ~20 s to start,
    once per run; stopped and removed at the end."""
    from tests.support.private_mysql import private_mysql
    try:
        cm = private_mysql(devservices)
        params = cm.__enter__()
    except Exception as e:
        pytest.fail(f"a private MySQL server could not start: {e}", pytrace=False)
    yield params
    cm.__exit__(None, None, None)


@pytest.fixture
def private_mysql_db(private_mysql_server, request):
    """A fresh database on :func:`private_mysql_server`."""
    db = _fresh_db(Services(etcd="", mysql={"private": private_mysql_server}), "private", request)
    yield db
    _drop_db(db)


@pytest.fixture(scope="session")
def etcd_client(services):
    from coordinator.etcd_client import connect
    client = connect(services.etcd)
    client.status()  # fail here, with the endpoint, if etcd does not answer
    yield client
    client.close()


@pytest.fixture
def etcd_prefix(etcd_client):
    """A key prefix private to this test; everything under it is deleted afterwards."""
    prefix = f"/shardmerge-test/{uuid.uuid4().hex[:12]}/"
    yield prefix
    etcd_client.delete_prefix(prefix)


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole run (starting one costs seconds)."""
    from worker.spark_session import builder
    session = builder("shardmerge-tests", "local[2]", spark__sql__shuffle__partitions="4",
                      spark__driver__memory="1g").getOrCreate()
    yield session
    session.stop()


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def spark_cluster():
    """A real standalone Spark cluster (master + worker JVMs on loopback); its URL.
    Stopped at the end of the run: it holds memory the rest of the suite wants."""
    sc = _load_script("sparkcluster")
    try:
        url = sc.start(sys.executable)
    except Exception as e:
        pytest.fail(f"standalone Spark cluster could not start (scripts/spark-cluster start): {e}", pytrace=False)
    yield url
    sc.stop()
