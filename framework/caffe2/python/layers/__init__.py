"""Caffe2's layers (``caffe2.python.layers``): each module holds one layer or a close group, and
every ``ModelLayer`` subclass is registered under its class name for ``LayerModelHelper``'s
``model.<LayerName>(...)``. Modules are imported explicitly here, in ``_MODULES`` order."""

from __future__ import annotations

from importlib import import_module

from framework.caffe2.python.layers import layers

_MODULES = [
    "tags", "sampling_trainable_mixin", "fc", "sampling_train", "concat", "dropout", "functional",
    "sparse_lookup", "position_weighted", "sparse_feature_hash", "merge_id_lists", "pairwise_dot_product",
    "batch_lr_loss", "batch_mse_loss", "batch_sigmoid_cross_entropy_loss", "batch_softmax_loss", "margin_rank_loss",
    "batch_distill_lr_loss", "adaptive_weight", "constant_weight", "homotopy_weight", "label_smooth", "add_bias",
    "last_n_window_collector", "reservoir_sampling", "uniform_sampling", "build_index", "gather_record",
    "select_record_by_context", "split", "batch_normalization", "conv", "arc_cosine_feature_map",
    "semi_random_features", "random_fourier_features", "feature_sparse_to_dense", "layer_normalization",
    "pairwise_similarity", "bucket_weighted", "blob_weighted_sum", "batch_huber_loss", "bpr_loss", "expand_dims",
    "dot_product", "sparse_dropout_with_replacement", "batch_unjoined_mse_loss", "fc_with_bootstrap",
]  # fmt: skip

for _name in _MODULES:
    import_module(f"{__name__}.{_name}")


def _register_subclasses(base: type) -> None:
    for cls in base.__subclasses__():
        layers.register_layer(cls.__name__, cls)
        _register_subclasses(cls)


_register_subclasses(layers.ModelLayer)
