"""``caffe2.python.serialized_test.serialized_test_util``: Caffe2's SerializedTestCase.

``@given(...)`` runs the test once with hypothesis seed 0 and one example while
``self.should_serialize`` is set, then as an ordinary ``hypothesis.given`` test. During that
first run ``assertReferenceChecks`` also writes (``-G``) or compares against a golden file
``<output dir>/operator_test/<file>.<test>.zip``: the op, its gradient ops and the inputs and
outputs. Differences from Caffe2:

- golden files are written as plain numpy arrays (``input_<i>``/``output_<i>`` in ``inout.npz``);
  Caffe2's own golden files store pickled object arrays, which are never loaded here (a clear
  error says so);
- without a golden file there is nothing to compare (Caffe2 ships one per test; run with
  ``-G`` once to create them).
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import sys
import tempfile
import threading
import types
from typing import Any, Callable
from zipfile import ZipFile

import hypothesis as hy
import numpy as np

from framework.caffe2.python import gradient_checker
from framework.caffe2.python import hypothesis_test_util as hu
from framework.errors import FrameworkError
from framework.proto import caffe2_pb2

operator_test_type = "operator_test"
TOP_DIR = os.path.dirname(os.path.realpath(__file__))
DATA_SUFFIX = "data"
DATA_DIR = os.path.join(TOP_DIR, DATA_SUFFIX)
_output_context = threading.local()


def given(*given_args: Any, **given_kwargs: Any) -> Callable:
    def wrapper(f: Callable) -> Callable:
        hyp_func = hy.given(*given_args, **given_kwargs)(f)
        # the test's own @settings (if any) with one example: on a copy of the function, since
        # hypothesis refuses a second settings object on one function
        own = getattr(f, "_hypothesis_internal_use_settings", None)
        copy = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
        one = hy.settings(own, max_examples=1) if own is not None else hy.settings(max_examples=1)
        fixed_seed_func = hy.seed(0)(hy.given(*given_args, **given_kwargs)(one(copy)))

        def func(self: Any, *args: Any, **kwargs: Any) -> None:
            self.should_serialize = True
            fixed_seed_func(self, *args, **kwargs)
            self.should_serialize = False
            hyp_func(self, *args, **kwargs)

        func.__name__ = f.__name__
        return func

    return wrapper


def _getGradientOrNone(op_proto: Any) -> list:
    try:
        grad_ops, _ = gradient_checker.getGradientForOp(op_proto)
        return grad_ops
    except Exception:
        return []


class SerializedTestCase(hu.HypothesisTestCase):
    should_serialize = False

    def get_output_dir(self) -> str:
        return os.path.join(getattr(_output_context, "output_dir", DATA_DIR), operator_test_type)

    def get_output_filename(self) -> str:
        test_file = os.path.basename(inspect.getfile(self.__class__)).split(".")[0]
        return test_file + "." + self.id().split(".")[-1]

    def serialize_test(self, inputs: Any, outputs: Any, grad_ops: Any, op: Any, device_option: Any) -> None:
        output_dir = self.get_output_dir()
        os.makedirs(output_dir, exist_ok=True)
        full_dir = tempfile.mkdtemp()
        try:
            arrays = {f"input_{i}": np.asarray(x) for i, x in enumerate(inputs)}
            arrays.update({f"output_{i}": np.asarray(y) for i, y in enumerate(outputs)})
            arrays["device_type"] = np.array(int(device_option.device_type))
            np.savez_compressed(os.path.join(full_dir, "inout.npz"), **arrays)
            with open(os.path.join(full_dir, "op.pb"), "wb") as f:
                f.write(op.SerializeToString())
            with ZipFile(os.path.join(output_dir, self.get_output_filename() + ".zip"), "w") as z:
                z.write(os.path.join(full_dir, "op.pb"), "op.pb")
                z.write(os.path.join(full_dir, "inout.npz"), "inout.npz")
                for i, grad in enumerate(grad_ops):
                    z.writestr(f"grad_{i}.pb", grad.SerializeToString())
        finally:
            shutil.rmtree(full_dir)

    def compare_test(self, inputs: Any, outputs: Any, grad_ops: Any, atol: float = 1e-7, rtol: float = 1e-7) -> None:
        path = os.path.join(self.get_output_dir(), self.get_output_filename() + ".zip")
        if not os.path.exists(path):
            return  # no golden file: nothing to compare (see the module doc)
        with ZipFile(path) as z:
            op_bytes = z.read("op.pb")
            with z.open("inout.npz") as f:
                try:
                    loaded = dict(np.load(f, allow_pickle=False))
                except ValueError as e:
                    raise FrameworkError(
                        f"{path}: holds pickled object arrays (Caffe2's golden format), which are never loaded; "
                        "regenerate it with -G"
                    ) from e
            grads = [z.read(n) for n in sorted(z.namelist()) if n.startswith("grad_")]
        n_in = len([k for k in loaded if k.startswith("input_")])
        loaded_inputs = [loaded[f"input_{i}"] for i in range(n_in)]
        loaded_outputs = [loaded[f"output_{i}"] for i in range(len([k for k in loaded if k.startswith("output_")]))]
        if not all(np.array_equal(x, y) for x, y in zip(inputs, loaded_inputs)):
            op_proto = caffe2_pb2.OperatorDef()
            op_proto.ParseFromString(op_bytes)
            device_option = caffe2_pb2.DeviceOption(device_type=int(loaded["device_type"]))
            outputs = hu.runOpOnInput(device_option, op_proto, loaded_inputs)
            grad_ops = _getGradientOrNone(op_proto)
        for x, y in zip(outputs, loaded_outputs):
            np.testing.assert_allclose(x, y, atol=atol, rtol=rtol)
        for i, data in enumerate(grads[: len(grad_ops)]):
            proto = caffe2_pb2.OperatorDef()
            proto.ParseFromString(data)
            self.assertTrue(proto == grad_ops[i])

    def assertSerializedOperatorChecks(
        self,
        inputs: Any,
        outputs: Any,
        gradient_operator: Any,
        op: Any,
        device_option: Any,
        atol: float = 1e-7,
        rtol: float = 1e-7,
    ) -> None:
        if not self.should_serialize:
            return
        if getattr(_output_context, "should_generate_output", False):
            self.serialize_test(inputs, outputs, gradient_operator, op, device_option)
        else:
            self.compare_test(inputs, outputs, gradient_operator, atol, rtol)

    def assertReferenceChecks(
        self,
        device_option: Any,
        op: Any,
        inputs: Any,
        reference: Any,
        input_device_options: Any = None,
        threshold: float = 1e-4,
        output_to_grad: Any = None,
        grad_reference: Any = None,
        atol: Any = None,
        outputs_to_check: Any = None,
        ensure_outputs_are_inferred: bool = False,
    ) -> list:
        outs = super().assertReferenceChecks(
            device_option,
            op,
            inputs,
            reference,
            input_device_options,
            threshold,
            output_to_grad,
            grad_reference,
            atol,
            outputs_to_check,
            ensure_outputs_are_inferred,
        )
        if not getattr(_output_context, "disable_serialized_check", False):
            self.assertSerializedOperatorChecks(
                inputs, outs, _getGradientOrNone(op), op, device_option, threshold if atol is None else atol, threshold
            )
        return outs


def testWithArgs() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "-G",
        "--generate-serialized",
        action="store_true",
        dest="generate",
        help="generate output files (default=false, compares to current files)",
    )
    parser.add_argument("-O", "--output", default=DATA_DIR, help="output directory (default: %(default)s)")
    parser.add_argument(
        "-D",
        "--disable-serialized_check",
        action="store_true",
        dest="disable",
        help="disable checking serialized tests",
    )
    parser.add_argument(
        "-C",
        "--disable-gen-coverage",
        action="store_true",
        dest="disable_coverage",
        help="disable generating coverage markdown file",
    )
    parser.add_argument("unittest_args", nargs="*")
    args = parser.parse_args()
    sys.argv[1:] = args.unittest_args
    _output_context.should_generate_output = args.generate
    _output_context.output_dir = args.output
    _output_context.disable_serialized_check = args.disable
    _output_context.disable_gen_coverage = args.disable_coverage
    import unittest

    unittest.main()
