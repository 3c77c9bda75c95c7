"""framework/ops/arg_reader.py: Caffe2's ArgumentHelper semantics (single vs repeated, kinds, defaults), errors
naming the op and the argument, the first of duplicated arguments read, and ArgsToDict on top of it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.caffe2.python.utils import ArgsToDict
from framework.errors import ArgumentError
from framework.ops.arg_reader import ArgReader
from framework.ops.schema import BOOL, FLOAT, FLOATS, INT, INTS, NET, STRING, STRINGS
from framework.proto.framework_pb2 import Argument, NetDef, OperatorDef


def _op(*args: Argument, name: str = "") -> OperatorDef:
    return OperatorDef(type="Conv", name=name, arg=list(args))


def test_single_values_by_kind_and_defaults():
    r = ArgReader(
        _op(
            Argument(name="k", i=3),
            Argument(name="eps", f=0.5),
            Argument(name="order", s=b"NHWC"),
            Argument(name="whole", f=2.0),
        )
    )
    assert r.single("k") == 3 and r.single("k", kind=FLOAT) == 3.0 and r.single("k", kind=BOOL) is True
    assert r.single("eps", kind=FLOAT) == 0.5 and r.single("order", kind=STRING) == "NHWC"
    assert r.single("whole", kind=INT) == 2  # a float holding an integer reads as one, as parse_args does
    assert r.single("absent", 7) == 7 and r.single("absent") is None and not r.has("absent")
    assert r.value("order") == "NHWC" and r.value("absent", "x") == "x"


def test_repeated_values_and_a_single_value_as_a_list_of_one():
    r = ArgReader(_op(Argument(name="pads", ints=[1, 2]), Argument(name="k", i=3), Argument(name="s", strings=[b"a"])))
    assert r.repeated("pads", kind=INTS) == [1, 2] and r.repeated("pads", kind=FLOATS) == [1.0, 2.0]
    assert r.repeated("k", kind=INTS) == [3]
    assert r.repeated("s", kind=STRINGS) == ["a"]
    assert r.repeated("absent") == [] and r.repeated("absent", (4, 5)) == [4, 5]


def test_errors_name_the_op_and_the_argument():
    r = ArgReader(_op(Argument(name="pads", ints=[1, 2]), Argument(name="eps", f=0.5), name="c1"))
    with pytest.raises(ArgumentError, match=r"op Conv 'c1': argument 'pads' holds a list"):
        r.single("pads")
    with pytest.raises(ArgumentError, match=r"op Conv 'c1': argument 'eps' must be an integer"):
        r.single("eps", kind=INT)
    with pytest.raises(ArgumentError, match=r"net 'n': argument 'x' must be a number"):
        ArgReader(NetDef(name="n", arg=[Argument(name="x", s=b"y")])).single("x", kind=FLOAT)


def test_has_single_checks_the_field_and_the_kind():
    net = NetDef(name="inner")
    r = ArgReader(_op(Argument(name="k", i=3), Argument(name="eps", f=0.5), Argument(name="l", ints=[1])))
    assert r.has_single("k", INT) and not r.has_single("eps", INT) and r.has_single("eps", FLOAT)
    assert not r.has_single("l") and not r.has_single("absent") and not r.has_single("k", NET)
    assert ArgReader(_op(Argument(name="body", n=net))).has_single("body", NET)


def test_the_first_of_duplicated_arguments_is_read():
    r = ArgReader(_op(Argument(name="k", i=1), Argument(name="k", i=2)))
    assert r.single("k") == 1 and r.proto("k").i == 1
    assert ArgReader(_op(Argument(name="b", i=1), Argument(name="a", i=2), Argument(name="b", i=3))).names() == [
        "b",
        "a",
    ]


@given(
    st.lists(
        st.tuples(
            st.sampled_from("abc"),
            st.one_of(
                st.integers(-5, 5).map(lambda v: ("i", v)),
                st.integers(-8, 8).map(lambda v: ("f", v / 4)),  # float32-exact
                st.lists(st.integers(-5, 5), min_size=1, max_size=3).map(lambda v: ("ints", v)),
                st.just(("none", None)),
            ),
        ),
        max_size=5,
    )
)
def test_args_to_dict_is_the_set_field_last_duplicate_winning(spec):
    args = []
    for name, (field, v) in spec:
        a = Argument(name=name)
        if field == "ints":
            a.ints.extend(v)
        elif field != "none":
            setattr(a, field, v)
        args.append(a)
    want = {}
    for name, (field, v) in spec:  # written out from ArgsToDict's contract
        want[name] = None if field == "none" else v
    got = {
        k: (list(v) if v is not None and not isinstance(v, (int, float)) else v) for k, v in ArgsToDict(args).items()
    }
    assert got == want
    first = {}
    for name, (field, v) in spec:
        first.setdefault(name, None if field == "none" else v)
    r = ArgReader(args)
    assert {k: r.value(k) for k in first} == {k: ([] if v is None else v) for k, v in first.items()}
