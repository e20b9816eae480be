"""pytest tests of the Python package (python/unico) over libunico.so:
every call it has, every exception class against the error map of
include/unico_errors.h, threads sharing a handle. Run by ctest as
python_unico (UNICO_LIBRARY: the build's libunico.so)."""
import json
import os
import re
import threading

import pytest

import unico

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = open(os.path.join(ROOT, "examples", "schema.cql"), encoding="utf-8").read()


@pytest.fixture
def db(tmp_path):
    with unico.open("lmdb:%s/data" % tmp_path) as d:
        d.apply_schema(SCHEMA)
        yield d


def test_error_classes_match_the_map():
    """One class per entry of UNICO_ERRNO_MAP, by its id, under unico.Error;
    the header, the loaded library and the module agree."""
    with open(os.path.join(ROOT, "include", "unico_errors.h"), encoding="utf-8") as f:
        header = dict((int(v), i) for v, i in
                      re.findall(r'XX\(\w+, (-\d+), "(\w+)"', f.read()))
    assert len(header) >= 14
    assert unico.library_error_ids() == header
    assert set(unico.ERRORS) == set(header.values())
    for rid, cls in unico.ERRORS.items():
        assert issubclass(cls, unico.Error) and cls is not unico.Error
        assert cls.id == rid
    names = {"conflict": "Conflict", "version_mismatch": "VersionMismatch",
             "limit": "LimitReached", "busy": "Busy", "unknown_outcome": "UnknownOutcome",
             "not_found": "NotFound", "invalid": "InvalidInput"}
    for rid, name in names.items():
        assert unico.ERRORS[rid] is getattr(unico, name)


def test_open_close(tmp_path):
    d = unico.open("lmdb:%s/data" % tmp_path)
    d.close()
    d.close()  # a second close does nothing
    with pytest.raises(ValueError):
        d.get("users", "u1")
    with pytest.raises(unico.Unsupported) as e:
        unico.open("nosuchscheme://x")
    assert "unsupported store URL" in str(e.value)


def test_schema(db):
    r = db.apply_schema(SCHEMA)
    assert r["changed"] is False and r["tables"] == ["users", "subscriptions"]
    with pytest.raises(unico.InvalidInput) as e:
        db.apply_schema("CREATE TABLE t (")
    assert e.value.code == -40001


def test_insert_get_lookup_update_delete(db):
    r = db.insert("users", {"id": "u1", "username": "alice", "email": "Alice@Example.COM"})
    assert r == {"pk": "u1", "version": 1}
    g = db.get("users", "u1")
    assert g["version"] == 1 and g["record"]["email"] == "Alice@Example.COM"
    lk = db.lookup("users", "users_email", "ALICE@example.com")
    assert lk["pk"] == "u1" and lk["value"] == ["alice@example.com"]
    # a two-column constraint takes a list
    db.insert("users", {"id": "u9", "oauth_provider": "gh", "external_user_id": "42"})
    assert db.lookup("users", "users_oauth_provider_external_user_id_key",
                     ["gh", "42"])["pk"] == "u9"
    assert db.update("users", "u1", {"username": "al"}, if_version=1) == {"pk": "u1", "version": 2}
    assert db.get("users", "u1")["record"]["username"] == "al"
    assert db.delete("users", "u1", if_version=2) == {"pk": "u1", "version": 2}
    with pytest.raises(unico.NotFound):
        db.get("users", "u1")
    with pytest.raises(unico.NotFound):
        db.lookup("users", "users_email", "alice@example.com")
    assert db.check()["ok"] is True


def test_conflict_carries_constraint_value_owner(db):
    db.insert("users", {"id": "u1", "email": "a@example.com"})
    with pytest.raises(unico.Conflict) as e:
        db.insert("users", {"id": "u2", "email": "A@EXAMPLE.com"})
    c = e.value
    assert isinstance(c, unico.Error)
    assert (c.constraint, c.value, c.owner, c.owner_table, c.id) == \
        ("users_email", ["a@example.com"], "u1", "users", "conflict")
    assert "already taken" in str(c)
    # nothing was written
    with pytest.raises(unico.NotFound):
        db.get("users", "u2")


def test_version_mismatch_and_limit(db):
    db.insert("users", {"id": "u1", "username": "x"})
    with pytest.raises(unico.VersionMismatch) as e:
        db.update("users", "u1", {"username": "y"}, if_version=7)
    assert e.value.current_version == 1
    for i in range(3):
        db.insert("subscriptions", {"id": "s%d" % i, "poll_id": "p", "name": "n%d" % i,
                                    "option": "a"})
    with pytest.raises(unico.LimitReached) as e:
        db.insert("subscriptions", {"id": "s9", "poll_id": "p", "name": "n9", "option": "a"})
    assert e.value.constraint == "per_option"


def test_bad_input_names_column(db):
    with pytest.raises(unico.InvalidInput) as e:
        db.insert("users", {"id": "u1", "username": 5})
    assert e.value.column == "username"
    with pytest.raises(unico.InvalidInput):
        db.insert("nosuch", {"id": "u1"})


def test_op_id_replay_and_reuse(db):
    a = db.insert("users", {"id": "u1", "email": "e@x"}, op_id="op-1")
    assert db.insert("users", {"id": "u1", "email": "e@x"}, op_id="op-1") == a
    with pytest.raises(unico.OpIdReused):
        db.insert("users", {"id": "u2", "email": "f@x"}, op_id="op-1")


def test_reserve_hold_release(db):
    h = db.reserve("users", "users_username", "carol", 60000)
    assert h["token"]
    with pytest.raises(unico.Busy):
        db.insert("users", {"id": "u1", "username": "Carol"})
    assert db.insert("users", {"id": "u1", "username": "carol"}, hold=h["token"])["version"] == 1
    h2 = db.reserve("users", "users_username", "dave", 60000)
    assert db.release(h2["token"])["released"] is True
    with pytest.raises(unico.NotFound):
        db.release(h2["token"])
    db.insert("users", {"id": "u2", "username": "dave"})


def test_threads_share_a_handle(db):
    """Two threads insert through one handle; every insert lands, and the
    values they share are taken once (conflicts name the winner)."""
    errors, won = [], {}

    def writer(t):
        try:
            for i in range(200):
                try:
                    db.insert("users", {"id": "t%d-%d" % (t, i), "email": "e%d@x" % i})
                    won.setdefault(i, []).append(t)
                except unico.Conflict as e:
                    assert e.owner == "t%d-%d" % (1 - t, i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=writer, args=(t,)) for t in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert sorted(won) == list(range(200)) and all(len(w) == 1 for w in won.values())
    assert db.check()["records"] == 200


def test_corrupt_carries_report(tmp_path):
    with unico.open("lmdb:%s/data" % tmp_path) as d:
        d.apply_schema(SCHEMA)
        r = d.check()
        assert r["violations_total"] == 0 and json.dumps(r)


def test_insert_async(tmp_path):
    """insert_async answers as insert does, once durable (log mode: many
    writes in flight, shared syncs), conflicts included."""
    import asyncio

    async def main(d):
        rs = await asyncio.gather(*[d.insert_async("users", {"id": "a%d" % i, "email": "m%d@x" % (i % 50)})
                                    for i in range(100)], return_exceptions=True)
        return rs

    with unico.open("lmdb:%s/data?wal=on" % tmp_path) as d:
        d.apply_schema(SCHEMA)
        rs = asyncio.run(main(d))
        ok = [r for r in rs if isinstance(r, dict)]
        bad = [r for r in rs if not isinstance(r, dict)]
        assert len(ok) == 50 and all(r["version"] == 1 for r in ok)
        assert len(bad) == 50 and all(isinstance(e, unico.Conflict) for e in bad)
        for e in bad:
            assert d.get("users", e.owner)["record"]["email"] == e.value[0]
        assert d.check()["records"] == 50
    # the same on a store without deferred answers (cb before submit returns)
    with unico.open("lmdb:%s/data2" % tmp_path) as d:
        d.apply_schema(SCHEMA)
        assert asyncio.run(main(d))[0] == {"pk": "a0", "version": 1}


def test_update_delete_async(tmp_path):
    """update_async and delete_async answer as update and delete do, once
    durable: a moved email, a conflict naming its owner, a stale
    if_version, a delete and the NotFound after it."""
    import asyncio

    async def main(d):
        for i in range(4):
            await d.insert_async("users", {"id": "u%d" % i, "email": "e%d@x" % i})
        moved = await d.update_async("users", "u0", {"email": "new@x"})
        rs = await asyncio.gather(
            d.update_async("users", "u1", {"email": "E2@x"}),
            d.update_async("users", "u3", {"email": "z@x"}, if_version=7),
            d.delete_async("users", "u2", if_version=1),
            return_exceptions=True)
        gone = await asyncio.gather(d.delete_async("users", "u2"),
                                    return_exceptions=True)
        return moved, rs, gone[0]

    for url in ("lmdb:%s/data?wal=on" % tmp_path, "lmdb:%s/plain" % tmp_path):
        with unico.open(url) as d:
            d.apply_schema(SCHEMA)
            moved, rs, gone = asyncio.run(main(d))
            assert moved == {"pk": "u0", "version": 2}
            # u1 -> E2@x raced u2's delete: either order is a right answer
            if isinstance(rs[0], dict):
                assert rs[0] == {"pk": "u1", "version": 2}
            else:
                assert isinstance(rs[0], unico.Conflict) and rs[0].owner == "u2"
            assert isinstance(rs[1], unico.VersionMismatch)
            assert rs[1].current_version == 1
            assert rs[2] == {"pk": "u2", "version": 1}
            assert isinstance(gone, unico.NotFound)
            assert d.get("users", "u0")["record"]["email"] == "new@x"
            assert d.lookup("users", "users_email", "NEW@X")["pk"] == "u0"
            assert d.check()["violations_total"] == 0


def test_batch(db):
    """batch swaps two usernames (judged after the whole group), and a
    refused batch writes nothing and names the op refused."""
    db.insert("users", {"id": "a", "username": "ann"})
    db.insert("users", {"id": "b", "username": "bob"})
    swap = [{"op": "update", "table": "users", "key": "a", "patch": {"username": "bob"}},
            {"op": "update", "table": "users", "key": "b", "patch": {"username": "ann"}},
            {"op": "insert", "table": "users", "record": {"id": "c", "username": "cy"}}]
    r = db.batch(swap, op_id="swap-1")
    assert r == {"results": [{"pk": "a", "version": 2}, {"pk": "b", "version": 2},
                             {"pk": "c", "version": 1}]}
    assert db.lookup("users", "users_username", "BOB")["pk"] == "a"
    # the same batch again under its op id: the first answer, nothing
    # written twice; another request under that op id is refused
    assert db.batch(swap, op_id="swap-1") == r
    assert db.get("users", "a")["version"] == 2
    with pytest.raises(unico.OpIdReused):
        db.batch([{"op": "delete", "table": "users", "key": "c"}], op_id="swap-1")
    with pytest.raises(unico.Conflict) as ei:
        db.batch([{"op": "insert", "table": "users", "record": {"id": "d", "username": "dee"}},
                  {"op": "update", "table": "users", "key": "c", "patch": {"username": "ANN"}}])
    e = ei.value
    assert (e.index, e.op, e.table, e.owner, e.constraint) == (1, "update", "users", "b",
                                                               "users_username")
    with pytest.raises(unico.NotFound):
        db.get("users", "d")
    assert db.get("users", "c")["record"]["username"] == "cy"
    with pytest.raises(unico.InvalidInput) as ei:
        db.batch([{"op": "upsert", "table": "users"}])
    assert ei.value.index is None or ei.value.index == 0
    assert db.check()["violations_total"] == 0


def test_gil_released_during_a_call(monkeypatch):
    """A call blocked in C (open on a DynamoDB endpoint that accepts and
    never answers, 1.5 s timeout) lets another Python thread run all the
    while: ctypes.CDLL releases the GIL (ctypes.PyDLL would not)."""
    import socket
    import time
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    ticks, stop = [0], [False]

    def tick():
        while not stop[0]:
            ticks[0] += 1
            time.sleep(0.01)

    t = threading.Thread(target=tick)
    t.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(unico.Unavailable):
            unico.open("dynamodb://127.0.0.1:%d/unico_t?timeout_ms=1500&retry_ms=1000"
                       % ls.getsockname()[1])
    finally:
        stop[0] = True
        t.join()
        ls.close()
    took = time.monotonic() - t0
    assert took >= 1.0
    # the other thread ran through the call: at least a tick per 100 ms
    # even on a loaded machine (it ticks every 10 ms when it runs freely)
    assert ticks[0] >= took * 10, (ticks[0], took)


WRITER = r"""
import sys, unico
db = unico.open(sys.argv[1])
i = 0
while True:
    # acknowledged: the call returned (durable), then it is reported
    r = db.insert("users", {"id": "%s-%d" % (sys.argv[2], i), "email": "%s-%d@x" % (sys.argv[2], i)})
    sys.stdout.write("%s %d\n" % (r["pk"], r["version"]))
    sys.stdout.flush()
    i += 1
"""


@pytest.mark.parametrize("query", ["", "?wal=on"])
def test_sigkill_of_a_python_writer(tmp_path, query):
    """A Python process inserting is killed with SIGKILL in the middle of
    its writes, three times; every insert it was told of is there, with
    its version, and check finds nothing wrong."""
    import signal
    import subprocess
    import sys
    import time
    url = "lmdb:%s/data%s" % (tmp_path, query)
    with unico.open(url) as d:
        d.apply_schema(SCHEMA)
    acked = []
    for rnd in range(3):
        p = subprocess.Popen([sys.executable, "-c", WRITER, url, "r%d" % rnd],
                             stdout=subprocess.PIPE,
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        # the writer's first answer, then a little more, then SIGKILL
        first = p.stdout.readline()
        assert first, "the writer died before its first insert"
        time.sleep(0.3 + 0.2 * rnd)
        p.send_signal(signal.SIGKILL)
        out = first + p.stdout.read()
        p.wait()
        assert p.returncode == -signal.SIGKILL
        # (a line cut by the kill is no acknowledgement)
        got = [ln.split() for ln in out.decode().splitlines()
               if re.fullmatch(r"r%d-\d+ 1" % rnd, ln)]
        assert len(got) > 1
        acked += got
        with unico.open(url) as d:
            for pk, ver in acked:
                assert d.get("users", pk)["version"] == int(ver), pk
            r = d.check()
            assert r["ok"] is True and r["records"] >= len(acked)
