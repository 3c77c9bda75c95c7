"""``caffe2.python.models.seq2seq``: Caffe2's sequence-to-sequence model package (its model helper here)."""
