"""brew.Register refuses a taken name, brew.has_helper takes a helper or its name;
ModelHelper._Validate lists the duplicated parameters."""

import pytest

from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper


def test_register_twice_is_an_attribute_error():
    def h36a_registry_helper(model, val=-1):
        return val

    assert not brew.has_helper(h36a_registry_helper)
    brew.Register(h36a_registry_helper)
    assert brew.has_helper(h36a_registry_helper) and brew.has_helper("h36a_registry_helper")
    assert brew.h36a_registry_helper(ModelHelper(name="m"), val=3) == 3
    with pytest.raises(AttributeError, match="already exists"):
        brew.Register(h36a_registry_helper)


def test_has_helper_of_builtin_helpers_and_unknown_functions():
    assert brew.has_helper(brew.conv) and brew.has_helper("fc")

    def not_registered():
        pass

    assert not brew.has_helper(not_registered)


def test_validate_lists_duplicates_sorted():
    model = ModelHelper(name="dups")
    model.params.extend(["b", "a"])
    assert model._Validate() == []
    model.params.extend(["b", "z", "a", "b"])
    assert model._Validate() == ["a", "b"]
    with pytest.raises(Exception, match="parameters added twice"):
        model.Validate()
