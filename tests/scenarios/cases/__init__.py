"""DM optimistic cases, one DM test directory (pingcap/tiflow ``dm/tests/<dir>/run.sh``) a module.

Each module defines ``CASES`` (a tuple of ``case.Case``) and ``NOT_APPLICABLE`` ({DM case: why});
``registry.py`` finds them, so adding a module is all it takes.
"""
