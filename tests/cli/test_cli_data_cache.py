"""``framework.cli.data.read_examples`` reads a DB once per path, keeps the last few, and forgets them on reset."""

import numpy as np
import pytest

from framework.cli import data
from framework.cli.common import CLIError
from framework.ops.io.db_input import write_tensor_protos_db
from framework.runtime.state import RUNTIME


@pytest.fixture
def fresh_cache():
    saved = dict(data._EXAMPLES)
    data._EXAMPLES.clear()
    yield data._EXAMPLES
    data._EXAMPLES.clear()
    data._EXAMPLES.update(saved)


def _db(folder, name, rows):
    path = str(folder / name)
    x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
    write_tensor_protos_db(path, [x, np.arange(rows, dtype=np.int32)])
    return path, x


def test_a_path_is_read_once_and_reread_after_reset(tmp_path, fresh_cache):
    path, x = _db(tmp_path, "a.minidb", 3)
    first = data.read_examples(path)
    np.testing.assert_array_equal(first[0], x)
    assert data.read_examples(path) is first
    assert RUNTIME.held("cli.data.examples", dict) is fresh_cache
    fresh_cache.clear()  # what RUNTIME.reset() does to it (a reset of everything would disturb other tests)
    again = data.read_examples(path)
    assert again is not first
    np.testing.assert_array_equal(again[0], x)


def test_only_the_last_few_paths_are_kept(tmp_path, fresh_cache):
    paths = [_db(tmp_path, f"d{i}.minidb", 2)[0] for i in range(data._KEEP + 1)]
    for p in paths:
        data.read_examples(p)
    assert list(fresh_cache) == paths[1:]
    data.read_examples(paths[1])  # used again: now the most recent
    assert list(fresh_cache)[-1] == paths[1]


def test_a_missing_db_is_a_cli_error_and_nothing_is_kept(tmp_path, fresh_cache):
    with pytest.raises(CLIError, match="data DB not found"):
        data.read_examples(str(tmp_path / "none.minidb"))
    assert not fresh_cache
