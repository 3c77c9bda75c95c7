"""crf_predict.apply_crf / crf_update_predictions: the decoded scores pick, word by word, the classes of
the best path under the transitions (a numpy Viterbi over the framed predictions as reference)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import workspace
from framework.caffe2.python import crf
from framework.caffe2.python.crf_predict import crf_update_predictions
from framework.caffe2.python.model_helper import ModelHelper

LOW = -1000.0


def _best_path(predictions, transitions):
    """Viterbi over predictions framed by a begin row and an end row (two extra classes)."""
    t, c = predictions.shape
    framed = np.full((t + 2, c + 2), LOW, np.float64)
    framed[1:-1, :c] = predictions
    framed[0, c] = 0.0
    framed[-1, c + 1] = 0.0
    score = framed[0].copy()
    back = []
    for row in framed[1:]:
        cand = score[:, None] + transitions
        back.append(cand.argmax(axis=0))
        score = cand.max(axis=0) + row
    path = [int(score.argmax())]
    for b in reversed(back):
        path.append(int(b[path[-1]]))
    path.reverse()
    return path[1:-1]


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


@settings(max_examples=10, deadline=None)
@given(num_tags=st.integers(2, 4), num_words=st.integers(1, 8), seed=st.integers(0, 1000))
def test_decoded_scores_follow_the_best_path(num_tags, num_words, seed):
    workspace.ResetWorkspace()
    rng = np.random.default_rng(seed)
    predictions = rng.normal(size=(num_words, num_tags)).astype(np.float32)
    transitions = rng.uniform(-1, 1, size=(num_tags + 2, num_tags + 2)).astype(np.float32)
    model = ModelHelper(name="crf_decode")
    pred_blob, trans_blob = model.net.AddExternalInputs("predictions", "crf_transitions")
    workspace.FeedBlob(str(pred_blob), predictions)
    workspace.FeedBlob(str(trans_blob), transitions)
    layer = crf.CRFWithLoss(model, num_tags, trans_blob)
    decoded = crf_update_predictions(model, layer, pred_blob)
    workspace.RunNetOnce(model.param_init_net)
    workspace.RunNetOnce(model.net)
    out = workspace.FetchBlob(str(decoded))
    assert out.shape == (num_words, num_tags)
    assert out.argmax(axis=1).tolist() == _best_path(predictions.astype(np.float64), transitions)
    # each word keeps its scores, only moved between classes
    np.testing.assert_allclose(np.sort(out, axis=1), np.sort(predictions, axis=1), rtol=1e-6)
