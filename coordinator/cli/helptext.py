"""What every ``shardctl`` command's ``--help`` shows beyond its flags: a description (the
command's own, else its one-line help), its defaults, and an example.  ``finish(parser)`` is
applied once the commands are registered; ``EXAMPLES`` holds one or more example lines per
command path, and a test walks the parser so no command goes without."""
from __future__ import annotations

import argparse
import re

EXAMPLES: dict[str, list[str]] = {
    "master": ["shardctl master --etcd 127.0.0.1:2379 --listen 127.0.0.1:8261 --metrics-addr 127.0.0.1:8262",
               "shardctl master --config master.yaml   # ssl-ca, ssl-cert, ssl-key, cert-allowed-cn, ..."],
    "worker": ["shardctl worker --etcd 127.0.0.1:2379 --source source1.yaml --metrics-addr 127.0.0.1:8263"],
    "start-task": ["shardctl start-task task.yaml", "shardctl start-task --remove-meta -s source1 task.yaml"],
    "check-task": ["shardctl check-task task.yaml"],
    "stop-task": ["shardctl stop-task my-task", "shardctl stop-task -s source2 my-task"],
    "pause-task": ["shardctl pause-task my-task"],
    "resume-task": ["shardctl resume-task -s source1 my-task"],
    "query-status": ["shardctl query-status", "shardctl query-status my-task --format table"],
    "shard-ddl-lock": ["shardctl shard-ddl-lock my-task",
                       "shardctl shard-ddl-lock unlock 'my-task-`shop`.`orders`' -s source1 -d shop_01 -t orders_0 "
                       "--action skip"],
    "show-ddl-locks": ["shardctl show-ddl-locks my-task"],
    "unlock-ddl-lock": ["shardctl unlock-ddl-lock 'my-task-`shop`.`orders`' -s source1 -d shop_01 -t orders_0"],
    "operate-source": ["shardctl operate-source create source1.yaml", "shardctl operate-source show -s source1",
                       "shardctl operate-source stop source1"],
    "transfer-source": ["shardctl transfer-source source1 worker-2"],
    "config": ["shardctl config task my-task"],
    "get-config": ["shardctl get-config source source1"],
    "list-member": ["shardctl list-member", "shardctl --master-addr 10.0.0.1:8261,10.0.0.2:8261 list-member"],
    "binlog": ["shardctl binlog skip my-task -s source1"],
    "binlog skip": ["shardctl binlog skip my-task -s source1", "shardctl binlog skip my-task -s source1 "
                                                               "-b mysql-bin.000003:1234"],
    "binlog replace": ["shardctl binlog replace my-task -s source1 \"ALTER TABLE orders_0 ADD COLUMN c INT\""],
    "binlog inject": ["shardctl binlog inject my-task -s source1 \"ALTER TABLE orders_0 ADD INDEX (c)\""],
    "binlog revert": ["shardctl binlog revert my-task -s source1 -b mysql-bin.000003:1234"],
    "binlog list": ["shardctl binlog list my-task"],
    "handle-error": ["shardctl handle-error my-task skip -s source1"],
    "binlog-schema": ["shardctl binlog-schema list my-task -s source1 shop_01 orders_0"],
    "binlog-schema list": ["shardctl binlog-schema list my-task -s source1 shop_01 orders_0"],
    "binlog-schema update": ["shardctl binlog-schema update my-task -s source1 shop_01 orders_0 orders_0.sql",
                             "shardctl binlog-schema update my-task -s source1 shop_01 orders_0 --from-target"],
    "binlog-schema delete": ["shardctl binlog-schema delete my-task -s source1 shop_01 orders_0"],
    "ddl-preview": ["shardctl ddl-preview my-task \"ALTER TABLE shop.orders ADD COLUMN note VARCHAR(64)\"",
                    "shardctl ddl-preview my-task -s source1 --tables 'shop_01.*' \"ALTER TABLE shop.orders RENAME "
                    "COLUMN note TO remark\" --format table",
                    "shardctl ddl-preview my-task --plan rollout.yaml"],
    "completion": ["source <(shardctl completion bash)", "shardctl completion zsh > ~/.zfunc/_shardctl"],
    "validation": ["shardctl validation status my-task     # says there is no validator yet; use check"],
    "offline-member": ["shardctl offline-member --type worker --name worker1"],
    "encrypt": ["shardctl encrypt 'secret'        # put the output in a source file's from.password"],
    "decrypt": ["shardctl decrypt 'Ae0e3...='"],
    "check": ["shardctl check --task-file task.yaml --source-file source1.yaml --source-file source2.yaml"],
}


def plain(text: str) -> str:
    """Docstring text for a terminal: no reStructuredText literals (``x`` -> 'x', a closing ``::``
    -> ``:``)."""
    text = re.sub(r"``([^`]+)``", r"'\1'", text)
    return re.sub(r"::$", ":", text, flags=re.M)


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Description and example kept as written; every option with a real default shows it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if ("%(default)" in text or "(default" in text or d in (None, "", [], False)
                or d is argparse.SUPPRESS or not action.option_strings):
            return text
        return text + " (default: %(default)s)"


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    """name -> one-line help of each sub-command of ``parser``."""
    out: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                out[choice.dest] = choice.help or ""
    return out


def finish(root: argparse.ArgumentParser, walk) -> None:
    """Give every command below ``root`` its description, defaults and example."""
    helps: dict[int, dict[str, str]] = {}
    for path, parser in walk(root):
        helps[id(parser)] = _helps(parser)
        if not path:
            continue
        key = " ".join(path)
        parent = next(p for q, p in walk(root) if q == path[:-1])
        one_line = helps.get(id(parent), {}).get(path[-1], "")
        desc = parser.description or (one_line[:1].upper() + one_line[1:] + ("." if one_line else ""))
        parser.description = plain(desc)
        parser.formatter_class = Formatter
        lines = EXAMPLES.get(key, [])
        if lines:
            parser.epilog = "example" + ("s" if len(lines) > 1 else "") + ":\n" + "\n".join(f"  {x}" for x in lines)
