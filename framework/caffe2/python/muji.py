"""``caffe2.python.muji``: all-reduce of one blob per GPU built from plain ops (Add and Copy, each with the
device option of the GPU it runs on), as Caffe2's module.

``Allreduce(net, blobs, reduced_affix="_reduced", gpu_indices=None)`` picks, from
``workspace.GetGpuPeerAccessPattern()``, a tree for 2, 4 (all peers, or two peer groups {0,1} {2,3}) or 8
GPUs, else ``AllreduceFallback`` (everything summed on the first GPU, then copied back). Each returns the
reduced blobs, ``<blob><reduced_affix>`` (the tree forms reuse the intermediate sums' names, as Caffe2).
Here no GPU exists: the peer pattern is empty, so ``Allreduce`` always takes the fallback, and the GPU
device options run on the CPU like every CUDA option of this framework.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework.caffe2.python import workspace
from framework.proto import caffe2_pb2

__all__ = [
    "Allreduce",
    "Allreduce2",
    "Allreduce4",
    "Allreduce4Group2",
    "Allreduce8",
    "AllreduceFallback",
    "OnCPU",
    "OnGPU",
]


def OnGPU(gpu_id: int) -> caffe2_pb2.DeviceOption:
    """The device option of GPU ``gpu_id``."""
    option = caffe2_pb2.DeviceOption()
    option.device_type = workspace.GpuDeviceType
    option.device_id = gpu_id
    return option


def OnCPU() -> caffe2_pb2.DeviceOption:
    option = caffe2_pb2.DeviceOption()
    option.device_type = caffe2_pb2.CPU
    return option


def Allreduce(net: Any, blobs: Sequence[Any], reduced_affix: str = "_reduced", gpu_indices: Any = None) -> Any:
    """Sum ``blobs`` (one per GPU of ``gpu_indices``, default 0..n-1) into a reduced copy on each GPU."""
    if gpu_indices is None:
        gpu_indices = list(range(len(blobs)))
    if len(gpu_indices) != len(blobs):
        raise RuntimeError(f"gpu_indices length and blobs length mismatch: {len(gpu_indices)} vs {len(blobs)}")
    pattern = np.asarray(workspace.GetGpuPeerAccessPattern())
    n, size = len(blobs), (pattern.shape[0] if pattern.ndim == 2 else 0)
    if n == 2 and size >= 2 and np.all(pattern[:2, :2]):
        return Allreduce2(net, blobs, reduced_affix, gpu_indices)
    if n == 4 and size >= 4 and np.all(pattern[:4, :4]):
        return Allreduce4(net, blobs, reduced_affix, gpu_indices)
    if n == 4 and size >= 4 and np.all(pattern[:2, :2]) and np.all(pattern[2:4, 2:4]):
        return Allreduce4Group2(net, blobs, reduced_affix, gpu_indices)
    if n == 8 and size >= 8 and np.all(pattern[:8, :8]):
        return Allreduce8(net, blobs, reduced_affix, gpu_indices)
    return AllreduceFallback(net, blobs, reduced_affix, gpu_indices)


def Allreduce2(net: Any, blobs: Sequence[Any], reduced_affix: str, gpu_indices: Sequence[int]) -> tuple:
    """0r = 0 + 1 on GPU 0; 1r = copy of 0r on GPU 1."""
    a, b = blobs
    ga, gb = gpu_indices
    a_r = net.Add([a, b], f"{a}{reduced_affix}", device_option=OnGPU(ga))
    b_r = net.Copy([a_r], f"{b}{reduced_affix}", device_option=OnGPU(gb))
    return a_r, b_r


def _tree4(net: Any, blobs: Sequence[Any], affix: str, gpus: Sequence[int], copy_across: bool) -> tuple:
    """0r = 0 + 1, 2r = 2 + 3, 0r += 2r (through a copy on GPU 0 when the groups are not peers), then 2r, 1r,
    3r are copies."""
    a, b, c, d = blobs
    ga, gb, gc, gd = gpus
    a_r = net.Add([a, b], f"{a}{affix}", device_option=OnGPU(ga))
    c_r = net.Add([c, d], f"{c}{affix}", device_option=OnGPU(gc))
    other = net.Copy([c_r], f"{c_r}_copy", device_option=OnGPU(ga)) if copy_across else c_r
    a_r = net.Add([a_r, other], a_r, device_option=OnGPU(ga))
    c_r = net.Copy([a_r], c_r, device_option=OnGPU(gc))
    b_r = net.Copy([a_r], f"{b}{affix}", device_option=OnGPU(gb))
    d_r = net.Copy([c_r], f"{d}{affix}", device_option=OnGPU(gd))
    return a_r, b_r, c_r, d_r


def Allreduce4(net: Any, blobs: Sequence[Any], reduced_affix: str, gpu_indices: Sequence[int]) -> tuple:
    """Four GPUs that are all peers: a two-level tree."""
    return _tree4(net, blobs, reduced_affix, gpu_indices, copy_across=False)


def Allreduce4Group2(net: Any, blobs: Sequence[Any], reduced_affix: str, gpu_indices: Sequence[int]) -> tuple:
    """Four GPUs in two peer groups {0,1} and {2,3}: the second group's sum is copied to GPU 0 first."""
    return _tree4(net, blobs, reduced_affix, gpu_indices, copy_across=True)


def Allreduce8(net: Any, blobs: Sequence[Any], reduced_affix: str, gpu_indices: Sequence[int]) -> list:
    """Eight GPUs that are all peers: pairs, then quads, then the halves (through a copy on GPU 0), then
    copies back down the tree."""
    red: list[Any] = [None] * 8
    for i in (0, 2, 4, 6):
        red[i] = net.Add([blobs[i], blobs[i + 1]], f"{blobs[i]}{reduced_affix}", device_option=OnGPU(gpu_indices[i]))
    for i in (0, 4):
        red[i] = net.Add([red[i], red[i + 2]], f"{blobs[i]}{reduced_affix}", device_option=OnGPU(gpu_indices[i]))
    half = net.Copy([red[4]], f"{red[4]}_copy", device_option=OnGPU(gpu_indices[0]))
    red[0] = net.Add([red[0], half], red[0], device_option=OnGPU(gpu_indices[0]))
    red[4] = net.Copy([red[0]], red[4], device_option=OnGPU(gpu_indices[4]))
    for i in (2, 6):
        red[i] = net.Copy([red[i - 2]], red[i], device_option=OnGPU(gpu_indices[i]))
    for i in (1, 3, 5, 7):
        red[i] = net.Copy([red[i - 1]], f"{blobs[i]}{reduced_affix}", device_option=OnGPU(gpu_indices[i]))
    return red


def AllreduceFallback(net: Any, blobs: Sequence[Any], reduced_affix: str, gpu_indices: Sequence[int]) -> list:
    """No peer access assumed: 0r = 0 (a copy, or blob 0 itself when ``reduced_affix`` is empty), then each
    other blob is copied to GPU 0 (``<0r>_temp_copy``) and added; finally ir = copy of 0r on GPU i."""
    red: list[Any] = [None] * len(gpu_indices)
    g0 = gpu_indices[0]
    if reduced_affix != "":
        red[0] = net.Copy([blobs[0]], f"{blobs[0]}{reduced_affix}", device_option=OnGPU(g0))
    else:
        red[0] = blobs[0]
    temp_name = f"{red[0]}_temp_copy"
    for i in range(1, len(gpu_indices)):
        temp = net.Copy([blobs[i]], temp_name, device_option=OnGPU(g0))
        red[0] = net.Add([temp, red[0]], red[0], device_option=OnGPU(g0))
    for i in range(1, len(gpu_indices)):
        red[i] = net.Copy([red[0]], f"{blobs[i]}{reduced_affix}", device_option=OnGPU(gpu_indices[i]))
    return red
