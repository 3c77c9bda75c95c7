"""``caffe2.python.rnn``: helpers of Caffe2's recurrent-network tests."""
