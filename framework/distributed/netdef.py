"""Make a model folder's init and train NetDefs data-parallel over the ranks of an MPI job.

``distribute_nets(init_net, train_net, rank, size)`` returns rewritten copies (the inputs are not
changed) in which, as ``data_parallel_model`` does for nets built in Python:

- every ``CreateDB`` reads only this rank's shard (``num_shards`` = size, ``shard_id`` = rank);
- the init net creates the common world (and clones, one per gradient Allreduce up to
  ``max_worlds``) and ends by broadcasting every blob it created from rank 0, so all ranks start
  from rank 0's parameters and optimizer state;
- in the train net, once every parameter's gradient (``<param>_grad`` for a blob the init net
  creates) is written, one ``AllreduceBuckets`` sums them over the ranks (small ones packed into one
  MPI call) and a ``Scale`` by ``1 / size`` each makes them the gradient of the global batch's mean
  loss. If an update reads some gradient before the last one is written (interleaved backward and
  update ops), each gradient gets its own ``Allreduce`` right after its last write instead, on clones
  of the world chained with ``control_input`` so every rank runs them in the same order under any
  executor.

With ``size == 1`` the nets come back unchanged.
"""

from __future__ import annotations

from framework.proto import framework_pb2 as pb

WORLD = "dist_comm_world"
# Blobs the init net creates that are not state to broadcast (readers, worlds).
# init ops whose outputs are not tensors to broadcast (readers, communicators, locks, counters)
_NOT_STATE = {
    "CreateDB",
    "CreateCommonWorld",
    "CloneCommonWorld",
    "MPICreateCommonWorld",
    "CreateMutex",
    "CreateCounter",
    "CreateBlobsQueue",
}


def _arg(op: pb.OperatorDef, name: str, **value: object) -> None:
    for a in op.arg:
        if a.name == name:
            op.arg.remove(a)
            break
    op.arg.add(name=name, **value)


def distribute_nets(
    init_net: pb.NetDef, train_net: pb.NetDef, rank: int, size: int, max_worlds: int = 16
) -> tuple[pb.NetDef, pb.NetDef]:
    """Data-parallel copies of ``init_net`` and ``train_net`` for ``rank`` of ``size`` (module doc)."""
    init, train = pb.NetDef(), pb.NetDef()
    init.CopyFrom(init_net)
    train.CopyFrom(train_net)
    if size <= 1:
        return init, train
    state: list[str] = []
    for net in (init, train):
        for op in net.op:
            if op.type == "CreateDB":
                _arg(op, "num_shards", i=size)
                _arg(op, "shard_id", i=rank)
    for op in init.op:
        if op.type not in _NOT_STATE:
            state += [o for o in op.output if o not in state]
    grads = _param_grads(train, set(state))
    world = init.op.add(type="CreateCommonWorld", output=[WORLD])
    _arg(world, "size", i=size)
    _arg(world, "rank", i=rank)
    bucketed = _all_ready_before_use(train, grads)
    worlds = 0 if bucketed else max(1, min(len(grads), max_worlds))
    for k in range(worlds):
        init.op.add(type="CloneCommonWorld", input=[WORLD], output=[f"{WORLD}_{k}"])
    for blob in state:
        init.op.add(type="Broadcast", input=[WORLD, blob], output=[blob])
    if bucketed:
        _insert_bucket(train, grads, size)
    else:
        _insert_allreduces(train, grads, size, worlds)
    return init, train


def _all_ready_before_use(train: pb.NetDef, grads: list[tuple[int, str]]) -> bool:
    """Whether no op reads a gradient between its last write and the last write of any gradient."""
    if not grads:
        return False
    end = grads[-1][0]
    return not any(g in train.op[i].input for index, g in grads for i in range(index + 1, end + 1))


def _scale(grad: str, size: int) -> pb.OperatorDef:
    op = pb.OperatorDef(type="Scale", input=[grad], output=[grad])
    op.arg.add(name="scale", f=1.0 / size)
    return op


def _insert_bucket(train: pb.NetDef, grads: list[tuple[int, str]], size: int) -> None:
    names = [g for _, g in grads]
    ops = [pb.OperatorDef(type="AllreduceBuckets", input=[WORLD, *names], output=names)]
    ops += [_scale(g, size) for g in names]
    at = grads[-1][0] + 1
    rest = list(train.op)[at:]
    del train.op[at:]
    train.op.extend(ops + rest)


def _param_grads(train: pb.NetDef, state: set[str]) -> list[tuple[int, str]]:
    """(index of the last gradient op writing it, gradient name) for each ``<state blob>_grad`` the net
    writes. Update ops (they write a state blob: MomentumSGDUpdate rewrites the gradient in place as it
    updates the parameter) do not count: the reduction must come before them."""
    last: dict[str, int] = {}
    for i, op in enumerate(train.op):
        if any(o in state for o in op.output):
            continue
        for o in op.output:
            if o.endswith("_grad") and o[: -len("_grad")] in state:
                last[o] = i
    return sorted((i, g) for g, i in last.items())


def _insert_allreduces(train: pb.NetDef, grads: list[tuple[int, str]], size: int, worlds: int) -> None:
    ops = list(train.op)
    after: dict[int, list[pb.OperatorDef]] = {}
    for k, (index, grad) in enumerate(grads):
        red = pb.OperatorDef(type="Allreduce", input=[f"{WORLD}_{k % worlds}", grad], output=[grad])
        if k >= worlds:
            red.control_input.append(grads[k - worlds][1])
        after.setdefault(index, []).extend([red, _scale(grad, size)])
    del train.op[:]
    for i, op in enumerate(ops):
        train.op.append(op)
        train.op.extend(after.get(i, []))
