"""shardctl's command line as a dmctl user meets it: every command's --help is its own (a walk
of the whole argparse tree), shows defaults and an example, has no reStructuredText markup; bad
flags are one line, never a traceback; global flags work after the command; the completion
script comes from the parser and completes in a real bash."""
from __future__ import annotations

import argparse
import os
import subprocess

import pytest

from coordinator.cli import build_parser, main, walk
from coordinator.cli.helptext import EXAMPLES
from tests.support.procs import ROOT, SHARDCTL

COMMANDS = [(path, p) for path, p in walk(build_parser()) if path]


def test_every_command_has_its_own_help():
    texts: dict[str, tuple[str, ...]] = {}
    assert len(COMMANDS) >= 28
    for path, p in COMMANDS:
        text = p.format_help()
        name = " ".join(path)
        assert text.startswith(f"usage: shardctl {name} "), (name, text[:80])
        body = text.split("\n\n", 1)[1]          # after the usage block: the command's description first
        assert not body.startswith(("positional arguments", "options")), f"{name} has no description"
        assert "``" not in text and "::\n" not in text and ":class:" not in text, f"RST markup in {name} --help"
        assert name in EXAMPLES and "example" in text and f"shardctl {name}".split()[1] in text, name
        for line in EXAMPLES[name]:
            assert line in text, (name, line)
        assert text not in texts, f"{name} --help is the same as {texts.get(text)}"
        texts[text] = path


def test_defaults_are_shown():
    helps = {" ".join(path): " ".join(p.format_help().split()) for path, p in COMMANDS}
    assert "(default: 127.0.0.1:8261)" in helps["master"]
    assert "(default: 10)" in helps["check"]      # --max-keys
    assert "(default: INFO)" in helps["worker"]
    assert "$DM_MASTER_ADDR" in helps["query-status"]


def test_help_walk_sees_every_registered_parser():
    # the walk is the test's premise: a nested command (binlog skip) is reached
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"binlog skip", "binlog-schema update", "shard-ddl-lock", "completion"} <= names


def _shardctl(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SHARDCTL, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("argv, phrase", [
    (["master", "--etcd", "x:1", "--log-level", "LOUD"], "shardctl master: error: argument --log-level: 'LOUD'"),
    (["worker", "--etcd", "x:1", "--log-level", "x"], "shardctl worker: error: argument --log-level"),
    (["query-status", "--bogus"], "shardctl query-status: error: unrecognized arguments: --bogus"),
    (["binlog", "skip", "t", "--nope"], "shardctl binlog skip: error: unrecognized arguments: --nope"),
    (["--rpc-timeout", "soon", "list-member"], "argument --rpc-timeout: 'soon' is not a duration"),
    (["operate-source", "destroy"], "shardctl operate-source: error: argument op: invalid choice"),
])
def test_bad_flags_are_one_line(argv, phrase):
    r = _shardctl(*argv)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and phrase in r.stderr and "--help" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_master_addr_list_env_and_flags_after_the_command(capsys, monkeypatch):
    dead1, dead2 = "127.0.0.1:1", "127.0.0.1:2"
    # the environment names the masters (DM's variable too); every one is tried and named
    for var in ("SHARDMERGE_MASTER_ADDR", "DM_MASTER_ADDR"):
        monkeypatch.delenv("SHARDMERGE_MASTER_ADDR", raising=False)
        monkeypatch.delenv("DM_MASTER_ADDR", raising=False)
        monkeypatch.setenv(var, f"{dead1},{dead2}")
        rc = main(["list-member", "--rpc-timeout", "5s"])
        err = capsys.readouterr().err
        assert rc == 1 and f"no master answered ({dead1}, {dead2})" in err, err
    # the flag after the command wins over the environment
    rc = main(["list-member", "--master-addr", dead2])
    err = capsys.readouterr().err
    assert rc == 1 and f"cannot reach master at {dead2}" in err and dead1 not in err, err
    rc = main(["--master-addr", "nohostport", "list-member"])
    err = capsys.readouterr().err
    assert rc == 1 and "'nohostport' is not HOST:PORT" in err


def test_rpc_timeout_is_parsed_as_dmctl_durations():
    p = build_parser()
    assert p.parse_args(["--rpc-timeout", "10m", "list-member"]).rpc_timeout == 600
    assert p.parse_args(["list-member", "--rpc-timeout", "30"]).rpc_timeout == 30
    assert p.parse_args(["query-status", "t", "--format", "table"]).format == "table"
    with pytest.raises(SystemExit):
        p.parse_args(["--rpc-timeout", "0", "list-member"])


def _complete(script: str, line: str) -> list[str]:
    words = line.split(" ")
    bash = (f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
            "_shardctl; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "-c", bash], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_bash_completion_generated_from_the_parser():
    script = _shardctl("completion", "bash").stdout
    assert "complete -F _shardctl shardctl" in script
    assert {"start-task", "stop-task"} <= set(_complete(script, "shardctl st"))
    assert _complete(script, "shardctl binlog sk") == ["skip"]
    assert "--from-target" in _complete(script, "shardctl binlog-schema update --from"), "nested options"
    assert "--cert-allowed-cn" in _complete(script, "shardctl master --cert")
    zsh = _shardctl("completion", "zsh").stdout
    assert zsh.startswith("#compdef shardctl") and "bashcompinit" in zsh and "_shardctl_words" in zsh
    # every command of the parser is in the table
    top = set(_complete(script, "shardctl "))
    assert {" ".join(path) for path, _ in COMMANDS if len(path) == 1} <= top


def test_no_stray_parser_without_formatter():
    # every command shows defaults through the shared formatter
    for path, p in COMMANDS:
        assert p.formatter_class.__name__ == "Formatter", path
        assert isinstance(p, argparse.ArgumentParser)


@pytest.mark.parametrize("form", ["unlock", "remove-table"])
def test_the_help_of_a_shard_ddl_lock_form_is_that_forms(form):
    """`shardctl shard-ddl-lock unlock --help` printed the parent command's help (dmctl prints the
    sub-command's); run as a user runs it."""
    r = subprocess.run([SHARDCTL, "shard-ddl-lock", form, "--help"], capture_output=True, text=True, timeout=60)
    parent = subprocess.run([SHARDCTL, "shard-ddl-lock", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and parent.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: shardctl shard-ddl-lock {form} LOCK_ID -s SOURCE -d DATABASE -t TABLE"), r.stdout
    assert "[TASK]" not in r.stdout and r.stdout != parent.stdout
    assert f"example:\n  shardctl shard-ddl-lock {form} 'my-task-`shop`.`orders`'" in r.stdout
    assert ("--action" in r.stdout) == (form == "unlock")
    legacy = subprocess.run([SHARDCTL, "unlock-ddl-lock", "-h"], capture_output=True, text=True, timeout=60)
    assert legacy.stdout.startswith("usage: shardctl shard-ddl-lock unlock LOCK_ID")


def test_dmctl_validation_commands_say_there_is_no_validator_yet(capsys):
    """dmctl's `validation ...` forms (flags included) answer clearly, exit 1, and name `check`."""
    import json

    from coordinator.cli import main
    for argv in (["validation", "status", "my-task"], ["validation", "start", "--mode", "full", "my-task"],
                 ["validation", "show-error", "--error", "all", "my-task"]):
        assert main(argv) == 1
        doc = json.loads(capsys.readouterr().out)
        assert doc["result"] is False and "no continuous validator yet" in doc["msg"] and "shardctl check" in doc["msg"]
