"""``PairwiseSimilarity``: PairwiseDotProduct with a choice of similarity:
``pairwise_similarity_func="dot"`` (BatchMatMul of the embeddings) or ``"cosine_similarity"``
(the same after ``Normalize(axis=1)``, which, as in Caffe2, scales each embedding dimension over the
``n`` embeddings of a ``(batch, n, d)`` input rather than each embedding)."""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.layers.pairwise_dot_product import PairwiseDotProduct

__all__ = ["PairwiseSimilarity"]


class PairwiseSimilarity(PairwiseDotProduct):
    def __init__(
        self, model: Any, input_record: Any, output_dim: int, pairwise_similarity_func: str = "dot",
        name: str = "pairwise_similarity", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, input_record, output_dim, name=name, **kwargs)
        self.pairwise_similarity_func = pairwise_similarity_func

    def add_ops(self, net: Any) -> None:
        x, y = self.x_embeddings(), self.y_embeddings()
        if self.pairwise_similarity_func == "cosine_similarity":
            x, y = net.Normalize(x, axis=1), net.Normalize(y, axis=1)
        elif self.pairwise_similarity_func != "dot":
            raise NotImplementedError(f"pairwise_similarity_func={self.pairwise_similarity_func} is not valid")
        product = net.BatchMatMul([x, y], [self.get_next_blob_reference(str(x) + "_matmul")], trans_b=1)
        if self.indices_to_gather:
            flat = net.Flatten(product, product + "_flatten")
            net.BatchGather([flat, self.indices_to_gather()], self.output_schema())
        else:
            net.Flatten(product, self.output_schema())
