"""Every Python code block of the README and docs/*.md runs as written, and so does every command block
of the README outside Quick start (lines starting with `framework` or `python3 -c`), in a scratch copy
of the repository's examples and models."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced code block, fences paired in order."""
    blocks, info, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if info is None:
                info, body = line[3:].strip(), []
            else:
                blocks.append((info, "\n".join(body) + "\n"))
                info = None
        elif info is not None:
            body.append(line)
    return blocks


def python_blocks(path: Path) -> list[str]:
    """Python blocks; doctest-style ones (>>>) are run by their own doctests (tests/memory/test_docs_memory.py)."""
    blocks = fenced_blocks(path.read_text(encoding="utf-8"))
    return [b for info, b in blocks if info == "python" and not b.lstrip().startswith(">>>")]


def command_blocks(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"## Quick start.*?\n## ", "## ", text, flags=re.S)  # run by CI itself
    return [b for info, b in fenced_blocks(text) if info == "" and re.match(r"(framework|python3 -c) ", b)]


@pytest.fixture
def scratch(tmp_path):
    for folder in ("examples", "models"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def _env():
    return dict(
        os.environ,
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        OPENBLAS_NUM_THREADS="1",
        PYTHONPATH=str(ROOT),
    )


@pytest.mark.parametrize("doc", [d for d in DOCS if python_blocks(d)], ids=lambda d: d.name)
def test_python_blocks_run(doc, scratch):
    """The blocks of one file run in order in one interpreter (later blocks may use earlier names)."""
    code = "\n\n".join(python_blocks(doc))
    (scratch / "blocks.py").write_text(code, encoding="utf-8")
    p = subprocess.run(
        [sys.executable, "blocks.py"], cwd=scratch, capture_output=True, text=True, env=_env(), timeout=600
    )
    assert p.returncode == 0, f"{doc.name}:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"


def test_readme_command_blocks_run(scratch):
    blocks = command_blocks(ROOT / "README.md")
    assert blocks, "no command block found"
    for block in blocks:
        for line in block.strip().splitlines():
            p = subprocess.run(line, shell=True, cwd=scratch, capture_output=True, text=True, env=_env(), timeout=600)
            assert p.returncode == 0, f"{line}\n{p.stdout[-1000:]}\n{p.stderr[-2000:]}"
