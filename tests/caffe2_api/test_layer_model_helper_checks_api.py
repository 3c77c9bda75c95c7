"""LayerModelHelper: a parameter shared through ParameterSharing must be given the same optimizer each
time (Caffe2 2020's check): None means the default optimizer, NoOptim only matches NoOptim, Optimizers
must agree in type and attributes (``Optimizer.attributes``). Also filter_metrics_schema."""

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import layer_model_helper, schema, scope
from framework.caffe2.python.modeling.parameter_sharing import ParameterSharing
from framework.caffe2.python.optimizer import AdagradOptimizer, AdamOptimizer


@pytest.fixture
def model():
    workspace.ResetWorkspace()
    m = layer_model_helper.LayerModelHelper(
        "h36b_share", schema.Struct(("x", schema.Scalar((np.float32, (3,))))), schema.Struct()
    )
    m.default_optimizer = AdagradOptimizer(alpha=0.1, epsilon=0.5)
    return m


def two_fcs(m, first, second, top):
    with scope.NameScope(top), ParameterSharing({"b": "a"}):
        with scope.NameScope("a"):
            m.FC(m.input_feature_schema.x, 2, weight_optim=first)
        with scope.NameScope("b"):
            m.FC(m.input_feature_schema.x, 2, weight_optim=second)


def test_the_same_optimizer_is_accepted(model):
    two_fcs(model, None, None, "t0")
    two_fcs(model, model.NoOptim, model.NoOptim, "t1")
    two_fcs(model, AdamOptimizer(alpha=0.01), AdamOptimizer(alpha=0.01), "t2")  # equal attributes
    assert "t0/a/fc/w" in model.param_to_optim


@pytest.mark.parametrize(
    "first, second",
    [
        ("noop", None),  # None is the default optimizer, not NoOptim
        (None, "noop"),
        (None, "adagrad_other_alpha"),
        (None, "adam"),
    ],
)
def test_a_different_optimizer_is_refused(model, first, second):
    pick = {
        None: None,
        "noop": model.NoOptim,
        "adagrad_other_alpha": AdagradOptimizer(alpha=0.2, epsilon=0.5),
        "adam": AdamOptimizer(),
    }
    with pytest.raises(AssertionError, match="shared"):
        two_fcs(model, pick[first], pick[second], "t")


def test_attributes_leave_out_the_instance_number():
    a, b = AdagradOptimizer(alpha=0.3), AdagradOptimizer(alpha=0.3)
    assert a.get_cpu_blob_name("x") != b.get_cpu_blob_name("x")
    assert a.attributes == b.attributes and "_instance_num" not in a.attributes
    assert AdagradOptimizer(alpha=0.4).attributes != a.attributes


def test_filter_metrics_schema_keeps_the_listed_fields(model):
    model.add_metric_field("h36b:x", schema.Scalar())
    model.add_metric_field("h36b:y", schema.Scalar())
    model.add_metric_field("z", schema.Scalar())
    assert model.metrics_schema.field_names() == ["h36b:x", "h36b:y", "z"]
    model.filter_metrics_schema({"h36b:y", "z", "not_a_field"})
    assert model.metrics_schema.field_names() == ["h36b:y", "z"]
    assert model.metrics_schema == schema.Struct(
        ("h36b", schema.Struct(("y", schema.Scalar()))), ("z", schema.Scalar())
    )
    model.filter_metrics_schema(set())
    assert model.metrics_schema.field_names() == []
