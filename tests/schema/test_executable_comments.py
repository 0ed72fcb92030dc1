"""Executable comments in a shard DDL (``coordinator.schema.dialect.executed_text``): the
statement the schema model, the lock and the downstream see is the one the upstream server ran.
Checked against real MariaDB and MySQL 9.7: the table each server makes from the statement is
the one the model makes from the expanded text."""
from __future__ import annotations

import pytest

from coordinator.schema import apply_ddl, parse_create_table
from coordinator.schema.dialect import executed_text, server_version

BASE = "CREATE TABLE t (id INT PRIMARY KEY, v INT)"
STATEMENTS = [
    "ALTER TABLE t ADD q INT /*M! , ADD sneaky INT */",
    "ALTER TABLE t ADD q INT /*!50100 , ADD r BIGINT */",
    "ALTER TABLE t ADD q INT /*!99999 , ADD never INT */",
    "ALTER TABLE t ADD q INT /*!50699 , ADD r1 INT */ /*!50700 , ADD r2 INT */ /*!90700 , ADD r3 INT */",
    "ALTER TABLE t ADD q INT /*!100100 , ADD r4 INT */",
    "ALTER TABLE t ADD q INT /*M!100100 , ADD m1 INT */ /*M!999999 , ADD m2 INT */",
    "ALTER TABLE t ADD q VARCHAR(20) DEFAULT '/*!x*/' /* a plain comment */",
]


def test_expansion_by_flavor_and_version():
    assert executed_text(STATEMENTS[0]).split() == "ALTER TABLE t ADD q INT , ADD sneaky INT".split()
    assert executed_text(STATEMENTS[0], "9.7.0").split() == "ALTER TABLE t ADD q INT".split()
    assert executed_text(STATEMENTS[2], "8.0.36").split() == "ALTER TABLE t ADD q INT".split()
    assert executed_text(STATEMENTS[5], "10.11.6-MariaDB-0+deb12u1").split() == \
        "ALTER TABLE t ADD q INT , ADD m1 INT".split()
    assert executed_text(STATEMENTS[6]) == STATEMENTS[6]          # quoted text and plain comments stay
    assert server_version("10.11.6-MariaDB") == 101106 and server_version("9.7.0") == 90700
    assert server_version("5.5.5-10.11.19-MariaDB-0+deb12u1-log") == 101119


@pytest.mark.parametrize("server", ["source1_db", "mysql1_db"])
def test_the_model_of_the_expanded_text_is_what_the_server_made(server, request):
    db = request.getfixturevalue(server)
    with db.connect() as c:
        version = c.get_server_info()
    for i, stmt in enumerate(STATEMENTS):
        table = f"t{i}"
        db.execute(BASE.replace("TABLE t", f"TABLE {table}"))
        db.execute(stmt.replace("TABLE t", f"TABLE {table}"))
        made = parse_create_table(db.execute(f"SHOW CREATE TABLE {table}")[0][1])
        model = apply_ddl(parse_create_table(BASE), executed_text(stmt, version))
        assert _columns(made) == _columns(model), (server, version, stmt)


def _columns(s):
    return [(c.name, c.type.base, c.type.length) for c in s.columns]
