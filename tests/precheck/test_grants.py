"""SHOW GRANTS parsing (pure logic; the privilege checks against real users are in
test_checks.py)."""
from coordinator.precheck.grants import parse_grants


def test_global_database_and_table_scopes():
    g = parse_grants([
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`127.0.0.1` IDENTIFIED BY PASSWORD '*AB'",
        "GRANT SELECT ON `shop\\_01`.* TO `u`@`127.0.0.1`",
        "GRANT SELECT, INSERT ON `shop_%`.* TO `u`@`127.0.0.1`",
        "GRANT INSERT ON `other`.* TO `u`@`127.0.0.1`",
        "GRANT SELECT ON `x`.`Orders` TO `u`@`127.0.0.1`",
        "GRANT SELECT (a, b), UPDATE ON `y`.`t` TO `u`@`127.0.0.1`",
        "GRANT `some_role` TO `u`@`127.0.0.1`",
    ])
    assert g.has_global("REPLICATION SLAVE") and g.has_global("BINLOG MONITOR")
    assert not g.has_global("SELECT")
    assert g.on_table("SELECT", "shop_01", "orders")
    assert g.on_table("SELECT", "shop_xyz", "orders")          # `shop_%` pattern
    assert not g.on_table("SELECT", "other", "orders")         # INSERT only
    assert g.on_table("SELECT", "x", "orders")                 # table names compare case-insensitively
    assert not g.on_table("SELECT", "y", "t")                  # column-level SELECT is not enough
    assert g.on_table("UPDATE", "y", "t")


def test_escaped_underscore_is_literal_and_all_privileges():
    g = parse_grants(["GRANT SELECT ON `shop\\_01`.* TO `u`@`%`"])
    assert g.on_table("SELECT", "shop_01", "t")
    assert not g.on_table("SELECT", "shopX01", "t")
    g = parse_grants(["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"])
    assert g.has_global("REPLICATION SLAVE") and g.on_table("SELECT", "any", "t")
