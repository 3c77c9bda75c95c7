"""``framework warmup``: compile the kernels ahead of use, into the user cache folder.

The first use of the compiled kernels in a process without a cache compiles them (tens of seconds);
after this command every later process loads them from numba's cache in the user cache folder
(``$FRAMEWORK_CACHE_DIR``, else ``$XDG_CACHE_HOME/framework``, else ``~/.cache/framework``; numba's
``$NUMBA_CACHE_DIR`` wins), which works for a read-only install too. Kernels this CPU cannot run are
skipped; one whose compile fails is reported (the numpy kernel runs in its place).
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "warmup",
        help="compile the kernels ahead of use (into the user cache folder)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.ops.nn import kernel_support, machine, window_jit

    if not window_jit.available():
        print("the compiled kernels are not available (numba missing or FRAMEWORK_NO_JIT set): nothing to compile")
        return 0
    seconds = window_jit.warm_up()
    print(f"kernels ready in {seconds:.1f} s; cache: {machine.numba_cache_dir()}")
    skipped = {f: kernel_support.missing(f) for f in kernel_support.NEEDS if kernel_support.missing(f)}
    for family, lacks in sorted(skipped.items()):
        print(f"  {family}: not for this CPU (lacks {', '.join(lacks)}); its numpy kernel runs")
    for family, why in sorted(kernel_support.disabled().items()):
        print(f"  {family}: failed to compile ({why}); its numpy kernel runs")
    return 0
