"""(b) Fuzzing NetDefs: mutated binary and text nets (flipped, cut, inserted bytes; deep nesting;
non-UTF-8 names) read and instantiated give only the framework's errors, with memory bounded
by the allocation limit (lowered for the test)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import core
from framework.errors import FrameworkError
from framework.memory import set_allocation_limit
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef
from framework.proto.io import parse_bytes

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _valid_net() -> NetDef:
    net = core.Net("fuzzed")
    net.ConstantFill([], ["c"], shape=[2, 3], value=1.0)
    net.FC(["x", "w", "b"], ["y"])
    net.Relu(["y"], ["r"])
    net.Concat(["r", "r"], ["cat", "split"], axis=1)
    net.Softmax(["cat"], ["p"])
    net.Proto().external_input.extend(["x", "w", "b"])
    return net.Proto()


VALID_BIN = _valid_net().SerializeToString()
VALID_TEXT = str(_valid_net()).encode()


def _workspace() -> Workspace:
    ws = Workspace(allow_paths=())
    ws.feed_blob("x", np.ones((2, 3), np.float32))
    ws.feed_blob("w", np.ones((4, 3), np.float32))
    ws.feed_blob("b", np.zeros(4, np.float32))
    return ws


def _try(data: bytes) -> None:
    old = set_allocation_limit(64 << 20)
    try:
        net = parse_bytes(data, NetDef)
        ws = _workspace()
        if not net.name:
            net.name = "n"
        ws.create_net(net)
        ws.run_net(net.name)
    except FrameworkError:
        pass
    finally:
        set_allocation_limit(old)


mutation = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255), st.sampled_from("fdi")), max_size=6)


def _mutate(data: bytes, muts) -> bytes:
    b = bytearray(data)
    for pos, val, kind in muts:
        if not b:
            break
        p = pos % len(b)
        if kind == "f":
            b[p] ^= 1 << (val % 8)
        elif kind == "d":
            del b[p : p + 1 + val % 4]
        else:
            b[p:p] = bytes([val])
    return bytes(b)


@FUZZ
@given(mutation)
def test_mutated_binary_nets(muts):
    _try(_mutate(VALID_BIN, muts))


@FUZZ
@given(mutation)
def test_mutated_text_nets(muts):
    _try(_mutate(VALID_TEXT, muts))


@FUZZ
@given(st.integers(0, len(VALID_BIN)))
def test_cut_binary_nets(cut):
    _try(VALID_BIN[:cut])


@pytest.mark.parametrize("depth", [50, 200, 5000])
def test_deeply_nested_nets(depth):
    text = 'name: "x" op { type: "If" ' + 'arg { name: "then_net" n { op { type: "If" ' * depth
    text += "} } }" * depth + " }"
    _try(text.encode())


def test_non_utf8_names_are_errors_not_renamed_blobs():
    raw = bytearray(VALID_BIN)
    at = raw.index(b"cat")
    raw[at] = 0xFF
    with pytest.raises(FrameworkError, match="not valid UTF-8"):
        parse_bytes(bytes(raw), NetDef)
