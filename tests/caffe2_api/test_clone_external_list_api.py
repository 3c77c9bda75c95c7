"""Net.Clone(update_external_list=True): external inputs are what the kept ops read before any of
them writes it, external outputs what they write and no later kept op reads (Caffe2)."""

from framework import core


def _net():
    n = core.Net("ext_list_src")
    a1, a2 = n.AddExternalInput("a1"), n.AddExternalInput("a2")
    b1, b2 = n.Concat([a1, a2], ["b1", "b2"], axis=0)
    c1 = n.Sum([b1, "p1"], ["c1"])
    c2 = n.Scale([b2], ["c2"], scale=2.0)
    n.Sum([c1, c2], ["d"])
    return n


def test_masked_clone_recomputes_both_lists():
    first = _net().Clone("ext_first", op_id_mask=[0, 1], update_external_list=True)
    assert list(first.Proto().external_input) == ["a1", "a2", "p1"]
    assert list(first.Proto().external_output) == ["b2", "c1"]
    second = _net().Clone("ext_second", op_id_mask=[2, 3], update_external_list=True)
    assert list(second.Proto().external_input) == ["b2", "c1"]
    assert list(second.Proto().external_output) == ["d"]


def test_full_clone_with_update_and_in_place_ops():
    n = core.Net("ext_inplace")
    n.Relu(["x"], ["x"])  # read before written: external
    n.Scale(["x"], ["y"], scale=3.0)
    clone = n.Clone("ext_inplace_clone", update_external_list=True)
    assert list(clone.Proto().external_input) == ["x"]
    assert list(clone.Proto().external_output) == ["y"]
    # without the flag the lists are copied as they were
    assert list(n.Clone("ext_plain").Proto().external_input) == list(n.Proto().external_input)
