"""The ``framework`` command's table of subcommands: it matches what each module registers, the pre-scan finds
the subcommand past the global options, and a command imports only its own module."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from framework import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _subparsers(parser):
    (action,) = [a for a in parser._actions if a.dest == "command"]
    return action


def test_the_table_matches_what_each_module_registers():
    action = _subparsers(cli.build_parser())
    listed = {a.dest: a.help for a in action._choices_actions}
    assert listed == {name: help_text for name, _module, help_text in cli.COMMANDS}
    for name, module, _help in cli.COMMANDS:
        # the module named builds the subcommand named: its parser runs that module's code
        func = action.choices[name].get_default("func")
        assert func is not None and func.__module__ == f"framework.cli.{module}", name


def test_the_top_level_help_is_the_same_with_stand_ins():
    assert cli.build_parser("").format_help() == cli.build_parser().format_help()


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["run", "net.pbtxt"], "run"),
        (["--debug", "predict", "m"], "predict"),
        (["--root", "run", "inspect", "x"], "inspect"),
        (["--root=run", "draw", "x"], "draw"),
        (["--ro", "ops", "summary", "x"], "summary"),
        (["--allow-write", "a", "--allow-write", "b", "make-db"], "make-db"),
        (["launch", "-n", "2", "run", "x"], "launch"),
        (["--help"], None),
        (["bogus", "run"], None),
        ([], None),
    ],
)
def test_the_pre_scan_finds_the_subcommand(argv, command):
    assert cli._command_in(argv) == command


def test_a_global_option_valued_like_a_command_parses_as_before():
    parser, args = cli._parse(["--root", "run", "--allow-write", "ops", "run", "n.pbtxt", "--iters", "3"])
    full = cli.build_parser().parse_args(["--root", "run", "--allow-write", "ops", "run", "n.pbtxt", "--iters", "3"])
    assert (args.command, args.root, args.allow_write, args.net, args.iters) == ("run", "run", ["ops"], "n.pbtxt", 3)
    assert vars(args) == vars(full)
    assert parser.prog == "framework"


def test_the_stand_in_of_a_missed_command_falls_back_to_every_command(monkeypatch):
    # were the pre-scan to name another command, the stand-in parsed gives no func: parsed again in full
    monkeypatch.setattr(cli, "_command_in", lambda argv: "ops")
    _parser, args = cli._parse(["run", "n.pbtxt", "--iters", "2"])
    assert (args.command, args.net, args.iters) == ("run", "n.pbtxt", 2)
    assert args.func is not None


def test_help_and_a_command_import_only_their_own_modules():
    # a fresh process: which framework.cli modules a parse imports
    code = """
        import json, sys
        from framework import cli
        before = {m for m in sys.modules if m.startswith("framework.cli.")}
        cli._parse(["ops", "Relu"])
        after_ops = {m for m in sys.modules if m.startswith("framework.cli.")} - before
        print(json.dumps({"before": sorted(before), "ops": sorted(after_ops),
                          "libs": [m for m in ("framework.db", "onnx", "numba") if m in sys.modules]}))
    """
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", "\n".join(line[8:] for line in code.splitlines())],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "framework.cli.convert" not in seen["before"] and "framework.cli.run" not in seen["before"]
    assert "framework.cli.ops" in seen["ops"]
    assert not {"framework.cli.convert", "framework.cli.db_tools", "framework.cli.draw"} & set(seen["ops"])
    assert seen["libs"] == []
