"""Six real CNNs as Caffe2 nets (brew), the same in PyTorch eager and onnxruntime, and their benchmark.

    from bench.real_models import build, BUILDERS
    m = build("resnet50", batch=16)   # RealModel: predict_net, weights (name -> float32 array),
                                      # input_name/input_shape, output_name, logits_name,
                                      # init_net() (GivenTensorFill ops), input_data()
    run, get = ours_runner(m, m.input_data())              # framework
    run, get = torch_impl.torch_runner(m, x, threads=1)    # PyTorch eager (same weights)
    run, get = torch_impl.ort_runner(m, x, threads=1)      # onnxruntime (framework.onnx export)

Models (BUILDERS keys): resnet50, squeezenet1_1, resnet20_cifar, shufflenet_v2, densenet121, alexnet.
Run the suite with ``python -m bench.real_models`` (options: --models, --batches, --threads, --rounds,
--memory). Beside it: ``bench.real_models.profile`` (ours per op kind against PyTorch's aten ops),
``bench.real_models.ort_shapes`` (ours against onnxruntime per output shape, in the same minutes) and
``bench.real_models.scaling`` (our 2-thread speedup against plain GEMM threads', back to back).
"""

from bench.real_models.nets import BUILDERS, RealModel, build, model_flops

__all__ = ["BUILDERS", "RealModel", "build", "model_flops"]
