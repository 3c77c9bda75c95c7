"""``framework launch -n N COMMAND ...``: run a framework command on N MPI ranks (see docs/distributed.md)."""

from __future__ import annotations

import argparse

from framework.cli.common import CLIError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "launch",
        help="run a framework command on N ranks (MPI)",
        description="Run `framework COMMAND ...` on N ranks with mpiexec from the installed MPI, e.g. "
        "`framework launch -n 2 train models/mlp_digits --distributed --checkpoint runs/mlp.minidb`. "
        "The job ends when a rank fails or --timeout passes.",
    )
    p.add_argument("-n", "--ranks", type=int, required=True, help="number of ranks (processes)")
    p.add_argument("--timeout", type=int, default=24 * 3600, help="end the job after this many seconds")
    p.add_argument("--hostfile", help="MPICH hostfile for several machines (default: this machine)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the framework command and its arguments")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.distributed.launcher import launch

    argv = [a for a in args.command if a != "--"] if args.command[:1] == ["--"] else list(args.command)
    if not argv:
        raise CLIError(
            "launch needs a command to run", "e.g. framework launch -n 2 train models/mlp_digits --distributed"
        )
    if argv[0] == "launch":
        raise CLIError("launch cannot launch itself")
    argv, note = rank_argv(argv, args.ranks)
    if note:
        print(note, flush=True)
    return launch(args.ranks, argv, args.timeout, args.hostfile)


def rank_argv(argv: list[str], ranks: int) -> tuple[list[str], str]:
    """(argv to run on every rank, a note for the user). ``train`` on several ranks is data-parallel:
    without ``--distributed`` each rank would train its own model into the same checkpoint and history,
    so ``--distributed`` is added (and said)."""
    if ranks > 1 and argv[:1] == ["train"] and "--distributed" not in argv:
        return [*argv, "--distributed"], (
            f"launch: train on {ranks} ranks is data-parallel: added --distributed (each rank reads its share "
            "of the batches, gradients are averaged, rank 0 writes the checkpoint)"
        )
    return argv, ""


def distributed_setup(md) -> tuple[int, int]:
    """Make a ModelDir's nets data-parallel over this MPI job (``train --distributed``); (rank, size)."""
    from framework.distributed import rank_and_size
    from framework.distributed.netdef import distribute_nets

    rank, size = rank_and_size()
    if size == 1:
        print("--distributed: this process is not part of an MPI job of several ranks; training on one")
    md.init_net, md.train_net = distribute_nets(md.init_net, md.train_net, rank, size)
    return rank, size
