"""The compiled conv/pool kernels and what chooses between them: a layer between the core
(``memory``, ``runtime``) and the ops. The ops resolve their arguments into a ``geometry.Geometry`` and
hand the arrays to the prepared kernel; nothing here knows about operators, blobs or nets.

What lives here:

- the strategies the ops choose between: ``conv_strategies`` (2-D NCHW convolution) and
  ``pool_strategies`` (2-D NCHW max/average pooling), one object per way of computing the op
  (``fits`` / ``prepare`` / ``run``), tried in order, the numpy ones last; ``catalog`` lists them all
  (``framework warmup`` compiles and reports from it);
- the runners that plan scratch and threads for the chosen strategy: ``conv_nchw.ConvNCHW`` and
  ``pool_nchw`` (``JitPool2D``, ``SeparablePool2D``); ``geometry.Geometry``, the sizes they plan from;
- the numba wrappers over the compiled code (``window_jit``, ``winograd``) and the compiled code itself:
  plain numba loops (``window_kernels``, ``winograd_kernels``) and LLVM IR intrinsics (``microkernel``,
  ``channel_kernel``, ``depthwise3``, ``pool_columns``, built with ``simd_ir``);
- their machinery: ``cached_jit`` (numba's disk cache, loaded without the compiler), ``kernel_support``
  (which kernel families this CPU and process can run; the guard around a first call), ``machine`` (the
  machine key and the user cache folder);
- the kernel-choice data: ``dispatch_table`` (the thresholds, shipped defaults replaced by this machine's
  tuned table) and ``tuning`` (``framework tune``'s measurements that write it).

Importing this package imports nothing (no numpy, no numba); each module loads what it needs.

Conventions of the LLVM IR kernels (what a kernel may assume, what its caller guarantees):

- **vector width**: ``simd_ir.L`` float32 lanes, 16 with AVX-512, else 8 (``FRAMEWORK_MICROKERNEL_LANES``
  forces one); ``simd_ir.VEC`` is ``<L x float>``. Register blocks are sized for the register file of
  that width (16 lanes: 32 registers; 8 lanes: 16).
- **arithmetic**: float32 only; multiply-adds are ``llvm.fma`` (fused: one rounding), and the numba
  drivers are compiled with ``fastmath={"contract"}`` only (no reassociation), so a kernel's sums run in
  a fixed order and repeat bit for bit. Families that multiply need FMA in hardware
  (``kernel_support.NEEDS``); elsewhere the numpy path runs.
- **alignment**: none assumed. Vector loads and stores are emitted with ``align 4`` (a float's), so any
  float32 array, however offset, is valid.
- **bounds**: a kernel reads and writes only what its masks allow in the caller's arrays (``x``, ``y``,
  the residual): masked loads and stores at a run's ragged end (``llvm.masked.load/store``,
  ``gather/scatter``). Scratch planes are the kernel's own and zero-bordered: the caller sizes them with
  the kernel's ``SLACK`` cells past the last row, so unmasked vector loads may run past a row into the
  border or the slack, never past the buffer. Indices are unsigned (no wraparound checks) and numba's
  ``boundscheck`` is off: the wrappers (``window_jit``) check shapes and contiguity before the call.
- **operands**: C-contiguous input, output and residual (the wrappers copy an input that is not); the
  residual may be the output itself (an in-place sum: read before written, per register block). Filters
  are packed or transformed by the kernel's own ``pack``/transform into a buffer the caller keeps and
  refreshes per filter version (``memory.binding.stamp``).
- **threads**: a kernel call is ``nogil`` and writes only its slice of images or output channels; the
  caller splits work between threads (``runtime.parallel``), each with its own scratch.
- **failure**: the first call compiles (or loads from the cache) under ``kernel_support.call``; a compile
  that fails disables that family for the process and raises ``KernelUnavailable`` before anything is
  written, and the caller prepares again without it.
"""
