"""distribute_nets: what the data-parallel rewrite of a model folder's nets contains."""

import os

from framework.distributed.netdef import WORLD, distribute_nets
from framework.proto import framework_pb2 as pb
from framework.proto.io import read_net

MODEL = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models", "mlp_digits"
)


def nets():
    return read_net(os.path.join(MODEL, "init_net.pbtxt")), read_net(os.path.join(MODEL, "train_net.pbtxt"))


def args(op):
    return {a.name: (a.i if a.HasField("i") else a.f if a.HasField("f") else a.s) for a in op.arg}


def test_one_rank_is_unchanged():
    init, train = nets()
    i2, t2 = distribute_nets(init, train, 0, 1)
    assert i2 == init and t2 == train and i2 is not init


def test_sharded_readers_broadcast_state_and_one_bucketed_allreduce():
    init, train = nets()
    i2, t2 = distribute_nets(init, train, 1, 3)
    assert init == nets()[0]  # inputs untouched
    db = [op for op in i2.op if op.type == "CreateDB"]
    assert db and all(args(op)["num_shards"] == 3 and args(op)["shard_id"] == 1 for op in db)
    # every tensor the init net creates (not the readers, not a lock)
    created = {o for op in init.op if op.type not in ("CreateDB", "CreateMutex") for o in op.output}
    assert {op.input[1] for op in i2.op if op.type == "Broadcast"} == created
    world = [op for op in i2.op if op.type == "CreateCommonWorld"]
    assert len(world) == 1 and args(world[0]) == {"size": 3, "rank": 1}
    assert not any(op.type == "CloneCommonWorld" for op in i2.op)
    types = [op.type for op in t2.op]
    assert types.count("AllreduceBuckets") == 1
    at = types.index("AllreduceBuckets")
    grads = list(t2.op[at].input[1:])
    assert grads == list(t2.op[at].output) and grads and all(g.endswith("_grad") for g in grads)
    last_write = max(i for i, op in enumerate(t2.op[:at]) for o in op.output if o in grads)
    assert last_write == at - 1
    scales = t2.op[at + 1 : at + 1 + len(grads)]
    assert [s.input[0] for s in scales] == grads and all(abs(args(s)["scale"] - 1 / 3) < 1e-7 for s in scales)
    readers_after = [i for i, op in enumerate(t2.op) if i > at + len(grads) and any(g in op.input for g in grads)]
    assert readers_after  # the updates read the reduced, scaled gradients


def test_interleaved_updates_get_ordered_per_gradient_allreduces():
    init = pb.NetDef(op=[pb.OperatorDef(type="ConstantFill", output=[p]) for p in ("a", "b", "c")])
    train = pb.NetDef()
    for p in ("a", "b", "c"):  # each gradient is used by its update before the next is computed
        train.op.add(type="ConstantFill", output=[f"{p}_grad"])
        train.op.add(type="Add", input=[p, f"{p}_grad"], output=[p])
    _, t2 = distribute_nets(init, train, 0, 2, max_worlds=2)
    red = [op for op in t2.op if op.type == "Allreduce"]
    assert [op.input[0] for op in red] == [f"{WORLD}_0", f"{WORLD}_1", f"{WORLD}_0"]
    assert list(red[2].control_input) == ["a_grad"] and not red[0].control_input
    types = [op.type for op in t2.op]
    assert types[:4] == ["ConstantFill", "Allreduce", "Scale", "Add"]
