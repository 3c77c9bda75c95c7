"""Layer tags (Caffe2's ``caffe2.python.layers.tags``): strings attached to layers that the
instantiator reads (``EXCLUDE_FROM_PREDICTION``...) and a scope that adds them to every layer
created inside it.

>>> with Tags(Tags.EXCLUDE_FROM_PREDICTION):
...     TagContext.current().tags
['exclude_from_prediction']
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

__all__ = ["TagContext", "Tags"]


class TagContext:
    """The tags in force: an ordered list, one context object per thread (Caffe2 keeps one
    default context per thread through ``context.define_context(allow_default=True)``)."""

    _local = threading.local()

    def __init__(self, tags: list[str] | None = None) -> None:
        self.tags: list[str] = list(tags or [])

    @classmethod
    def current(cls, value: Any = None, required: bool = True) -> TagContext:
        ctx = getattr(cls._local, "ctx", None)
        if ctx is None:
            ctx = cls._local.ctx = cls()
        return ctx

    def add_tags(self, tags: list[str]) -> None:
        self.tags.extend(tags)

    def remove_tags(self, tags: list[str]) -> None:
        """Remove ``tags``, which must be the last ones added (scopes nest)."""
        if not tags:
            return
        if self.tags[-len(tags) :] != list(tags):
            raise ValueError(f"TagContext: tags {tags} are not the innermost ones ({self.tags})")
        del self.tags[-len(tags) :]


class Tags:
    """Tag names, and a context manager / decorator that adds tags to the current TagContext."""

    EXCLUDE_FROM_TRAIN = "exclude_from_train"
    EXCLUDE_FROM_EVAL = "exclude_from_eval"
    EXCLUDE_FROM_PREDICTION = "exclude_from_prediction"
    EXCLUDE_FROM_ACCUMULATE_PRED = "exclude_from_accumulate_pred"
    PREPROCESSING = "preprocessing"
    HANDLE_AS_SPARSE_LAYER = "handle_as_sparse_layer"
    PREFER_GPU = "prefer_gpu"
    CPU_ONLY = "cpu_only"
    LOCAL = "local"
    GRADIENT_FROM_PS = "gradient_from_ps"
    # hints for a distributed trainer: shard the layer's sparse parameter, keep it whole, or
    # colocate by component ("component:<name>")
    SPARSE_SHARDED = "sparse_sharded"
    SPARSE_DONT_SHARD = "sparse_dont_shard"
    COMPONENT = "component:"
    PIPELINE = "pipeline:"
    DT_TAGS = (SPARSE_SHARDED, SPARSE_DONT_SHARD, COMPONENT, PIPELINE)
    # marks layers whose schema overrides the predictor's (removed from prediction)
    PREDICTION_SCHEMA = "prediction_schema"

    TRAIN_ONLY: list[str] = []
    EVAL_ONLY: list[str] = []
    PREDICTION_ONLY: list[str] = []

    def __init__(self, tags: Any) -> None:
        self.tags = list(tags) if isinstance(tags, (list, tuple)) else [tags]

    def __enter__(self) -> Tags:
        TagContext.current().add_tags(self.tags)
        return self

    def __exit__(self, *exc: Any) -> None:
        TagContext.current().remove_tags(self.tags)

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper


Tags.TRAIN_ONLY = [Tags.EXCLUDE_FROM_PREDICTION, Tags.EXCLUDE_FROM_EVAL, Tags.EXCLUDE_FROM_ACCUMULATE_PRED]
Tags.EVAL_ONLY = [Tags.EXCLUDE_FROM_PREDICTION, Tags.EXCLUDE_FROM_TRAIN, Tags.EXCLUDE_FROM_ACCUMULATE_PRED]
Tags.PREDICTION_ONLY = [Tags.EXCLUDE_FROM_TRAIN, Tags.EXCLUDE_FROM_EVAL, Tags.EXCLUDE_FROM_ACCUMULATE_PRED]
