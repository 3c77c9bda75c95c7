"""workspace.C.create_db: a transaction commits when released (Caffe2's destructor), cursor keys are
bytes as Caffe2's pybind returns them."""

from framework import workspace


def test_released_transactions_commit_and_keys_are_bytes(tmp_path):
    path = str(tmp_path / "c.minidb")
    data = [(f"key{i}".encode(), f"value{i}".encode()) for i in range(1, 5)]
    db = workspace.C.create_db("minidb", path, workspace.C.Mode.write)
    for key, value in data:
        txn = db.new_transaction()
        txn.put(key, value)
        del txn  # no commit() call: releasing the transaction commits it
    del db
    db = workspace.C.create_db("minidb", path, workspace.C.Mode.read)
    cursor = db.new_cursor()
    seen = []
    while cursor.valid():
        seen.append((cursor.key(), cursor.value()))
        cursor.next()
    db.close()
    assert seen == data
    assert all(isinstance(k, bytes) for k, _ in seen)


def test_explicit_commit_then_release_writes_once(tmp_path):
    path = str(tmp_path / "once.minidb")
    db = workspace.C.create_db("minidb", path, workspace.C.Mode.write)
    txn = db.new_transaction()
    txn.put("only", b"v")
    txn.commit()
    del txn
    db.close()
    db = workspace.C.create_db("minidb", path, workspace.C.Mode.read)
    cursor = db.new_cursor()
    keys = []
    while cursor.valid():
        keys.append(cursor.key())
        cursor.next()
    assert keys == [b"only"]
