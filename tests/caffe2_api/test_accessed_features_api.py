"""layers.layers: AccessedFeatures, almost_equal_schemas (evicted forms of IdList / IdScoreList),
ModelLayer.get_accessed_features and FeatureSparseToDense's."""

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layer_model_helper import LayerModelHelper
from framework.caffe2.python.layers.layers import (
    AccessedFeatures,
    IdList,
    IdScoreList,
    almost_equal_schemas,
    get_key,
)


def test_almost_equal_schemas_accepts_evicted_forms():
    evicted_list = schema.ListWithEvicted(np.int64)
    evicted_map = schema.MapWithEvicted(np.int64, np.float32)
    assert almost_equal_schemas(evicted_list, IdList)
    assert almost_equal_schemas(evicted_map, IdScoreList)
    assert not almost_equal_schemas(evicted_list, IdScoreList)
    assert not schema.equal_schemas(evicted_list, IdList)
    plain = schema.Struct(("a", schema.Scalar(np.float32)))
    assert almost_equal_schemas(plain, schema.Struct(("a", schema.Scalar(np.float32))))
    evicted_list.values.set_metadata(schema.Metadata(categorical_limit=7))
    assert get_key(evicted_list).metadata.categorical_limit == 7


def test_feature_sparse_to_dense_reports_the_features_it_reads():
    model = LayerModelHelper(
        "accessed",
        input_feature_schema=schema.Struct(
            ("floats", schema.Map(np.int32, np.float32)),
            ("ids", schema.Map(np.int32, schema.List(np.int64))),
        ),
        trainer_extra_schema=schema.Struct(),
    )
    specs = [
        ("floats", schema.FeatureSpec(feature_type="FLOAT", feature_ids=[1, 2], feature_names=["a", "b"])),
        ("ids", schema.FeatureSpec(feature_type="ID_LIST", feature_ids=[7], feature_names=["c"])),
    ]
    model.FeatureSparseToDense(model.input_feature_schema, specs)
    layer = model.layers[-1]
    assert layer.get_accessed_features() == {
        "floats": [AccessedFeatures("FLOAT", {1, 2})],
        "ids": [AccessedFeatures("ID_LIST", {7})],
    }
    # a layer that reads no features says so
    model.FC(model.layers[-1].output_schema.floats, 2)
    assert model.layers[-1].get_accessed_features() == {}
