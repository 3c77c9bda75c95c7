"""Generate framework/ops/family_index.py: which op family registers each op type and blob type.

Usage (from the repository root): ``python docs/generate_family_index.py`` (``--check``: exit 1 if stale).
Run it after adding or moving an operator; ``tests/ops/test_families.py`` fails when the file is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "framework" / "ops" / "family_index.py"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> int:
    from framework.ops.families import index_text

    text = index_text()
    if "--check" in sys.argv[1:]:
        if OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT} is stale; run `python docs/generate_family_index.py`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
