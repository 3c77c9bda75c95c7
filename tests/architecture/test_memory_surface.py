"""No module outside framework/memory/ touches the memory core's slots (Blob._obj, Tensor._array,
Tensor._storage): other layers use its public surface (docs/architecture.md, "The memory core's surface")."""

from __future__ import annotations

import re
from pathlib import Path

import framework.memory

ROOT = Path(framework.memory.__file__).resolve().parents[1]
MEMORY = ROOT / "memory"
_SLOT = re.compile(r"\.(_obj|_storage)\b|\._array\b(?!\()")  # ``self._array(...)``: a method of another class


def test_no_slot_of_the_memory_core_is_used_outside_it():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if MEMORY in path.parents:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _SLOT.search(line.split("#", 1)[0]):
                found.append(f"{path.relative_to(ROOT.parent)}:{n}: {line.strip()}")
    hint = "use Blob.held / .held_tensor / .array, Tensor.array / .storage / .snapshot():\n"
    assert not found, hint + "\n".join(found)
