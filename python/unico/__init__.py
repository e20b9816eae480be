"""unico from Python: UNIQUE constraints and count limits for NoSQL stores.

A thin layer over the C library ``libunico.so`` through :mod:`ctypes` (no
compiler at install time). The library is found at ``$UNICO_LIBRARY`` when
that is set, else as ``libunico.so.0`` through the dynamic loader (an
install prefix the loader searches, e.g. ``/usr/local/lib``), else in the
``lib`` folder of this Python's prefix.

    import unico
    with unico.open("lmdb:/tmp/app-data") as db:
        db.apply_schema(open("schema.cql").read())
        db.insert("users", {"id": "u1", "email": "a@example.com"})
        try:
            db.insert("users", {"id": "u2", "email": "A@example.com"})
        except unico.Conflict as e:
            print(e.constraint, e.value, e.owner)   # users_email ['a@example.com'] u1

Every call answers as the C call does (docs/cli.md and include/unico.h say
what each does); a refusal raises the subclass of :class:`Error` of its
error id (the error map of include/unico_errors.h). The handle may be shared
by threads as the C handle may; ctypes releases the GIL around each call.
"""
import asyncio
import ctypes
import ctypes.util
import json as _json
import os
import sys

__all__ = ["open", "Database", "Error", "InvalidInput", "NotFound", "Conflict",
           "LimitReached", "VersionMismatch", "Busy", "Unavailable",
           "UnknownOutcome", "OutOfMemory", "StoreFull", "SchemaRefused",
           "Corrupt", "Unsupported", "OpIdReused", "ERRORS", "library_path"]

_CONSTRAINT_NAME_MAX = 838  # UNICO_CONSTRAINT_NAME_MAX of unico.h


class _Result(ctypes.Structure):
    # unico_result of include/unico.h, field for field
    _fields_ = [("rc", ctypes.c_int),
                ("json", ctypes.c_void_p),
                ("message", ctypes.c_char * 512),
                ("constraint", ctypes.c_char * (_CONSTRAINT_NAME_MAX + 1)),
                ("column", ctypes.c_char * 128),
                ("value", ctypes.c_void_p),
                ("owner", ctypes.c_void_p),
                ("version", ctypes.c_uint64),
                ("missing", ctypes.c_int),
                ("retry_at_ms", ctypes.c_uint64),
                ("owner_table", ctypes.c_char * 64)]


class _WriteOptions(ctypes.Structure):
    # unico_write_options (UNICO_WRITE_OPTIONS_VERSION 1)
    _fields_ = [("struct_version", ctypes.c_int),
                ("op_id", ctypes.c_char_p),
                ("if_version", ctypes.c_uint64),
                ("holds", ctypes.POINTER(ctypes.c_char_p)),
                ("nholds", ctypes.c_size_t)]


class _Write(ctypes.Structure):
    # unico_write of include/unico.h (unico_submit)
    _fields_ = [("kind", ctypes.c_int),
                ("table", ctypes.c_char_p),
                ("json", ctypes.c_char_p),
                ("pk_json", ctypes.c_char_p),
                ("opts", ctypes.POINTER(_WriteOptions)),
                ("values", ctypes.c_void_p),
                ("nvalues", ctypes.c_size_t),
                ("key", ctypes.c_void_p),
                ("nkey", ctypes.c_size_t)]


_WRITE_INSERT, _WRITE_UPDATE, _WRITE_DELETE = 1, 2, 3
_DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_Result))

# ---- errors ---------------------------------------------------------------

class Error(Exception):
    """A call unico refused or could not complete.

    ``code`` is the C return code (UNICO_E*), ``id`` its stable name (as in
    JSON errors and the HTTP API), ``message`` the library's sentence;
    ``constraint`` and ``column`` when the library names them (else None).
    """
    id = None

    def __init__(self, code, id, message, constraint=None, column=None):
        super().__init__(message)
        self.code = code
        self.id = id
        self.message = message
        self.constraint = constraint
        self.column = column


class InvalidInput(Error):
    """Bad input: a record, key, value or DDL unico does not take."""
    id = "invalid"


class NotFound(Error):
    """No record (or hold, or schema) of that key."""
    id = "not_found"


class Conflict(Error):
    """A unique value another record holds: ``constraint``, the normalized
    ``value`` (a list), the ``owner``'s primary key and its table
    (``owner_table``: another table where a NAMESPACE is shared)."""
    id = "conflict"

    def __init__(self, *a, value=None, owner=None, owner_table=None, **kw):
        super().__init__(*a, **kw)
        self.value = value
        self.owner = owner
        self.owner_table = owner_table


class LimitReached(Error):
    """A limit group is full (``constraint`` names the limit)."""
    id = "limit"


class VersionMismatch(Error):
    """The record is not at the version asked for: ``current_version``."""
    id = "version_mismatch"

    def __init__(self, *a, current_version=None, **kw):
        super().__init__(*a, **kw)
        self.current_version = current_version


class Busy(Error):
    """A value held by an operation in flight or reserved by a hold."""
    id = "busy"


class Unavailable(Error):
    """The store cannot be reached or does not take writes now."""
    id = "unavailable"


class UnknownOutcome(Error):
    """The write may or may not have applied: repeat it with the same op_id."""
    id = "unknown_outcome"


class OutOfMemory(Error):
    id = "out_of_memory"


class StoreFull(Error):
    id = "store_full"


class SchemaRefused(Error):
    """A schema change the store cannot make (``report`` for a build that
    found duplicates or groups over their limit, else None)."""
    id = "schema_refused"

    def __init__(self, *a, report=None, **kw):
        super().__init__(*a, **kw)
        self.report = report


class Corrupt(Error):
    """Records and claims disagree (``report``: check's report), or the
    store's data is damaged."""
    id = "corrupt"

    def __init__(self, *a, report=None, **kw):
        super().__init__(*a, **kw)
        self.report = report


class Unsupported(Error):
    id = "unsupported"


class OpIdReused(Error):
    """The op_id was used for another request."""
    id = "op_id_reused"


# error id -> class: one per entry of the error map (UNICO_ERRNO_MAP);
# checked against the library at load (_check_map) and by the tests
ERRORS = {c.id: c for c in (InvalidInput, NotFound, Conflict, LimitReached,
                            VersionMismatch, Busy, Unavailable, UnknownOutcome,
                            OutOfMemory, StoreFull, SchemaRefused, Corrupt,
                            Unsupported, OpIdReused)}

# ---- the library ----------------------------------------------------------


def _find_library():
    env = os.environ.get("UNICO_LIBRARY")
    if env:
        return env
    names = ["libunico.so.0"]
    found = ctypes.util.find_library("unico")
    if found:
        names.append(found)
    for n in names:
        try:
            ctypes.CDLL(n)
            return n
        except OSError:
            pass
    for d in ("lib", "lib64", os.path.join("lib", "x86_64-linux-gnu")):
        p = os.path.join(sys.prefix, d, "libunico.so.0")
        if os.path.exists(p):
            return p
    raise ImportError("unico: libunico.so.0 not found: install unico (cmake --install "
                      "build --prefix /usr/local) or set UNICO_LIBRARY to its path")


library_path = _find_library()
try:
    _lib = ctypes.CDLL(library_path)  # CDLL: the GIL is released around calls
except OSError as _e:
    raise ImportError("unico: cannot load the library %s%s: %s"
                      % (library_path, " (UNICO_LIBRARY)" if os.environ.get("UNICO_LIBRARY")
                         else "", _e)) from None
_R = ctypes.POINTER(_Result)
_U = ctypes.c_void_p
_S = ctypes.c_char_p
_sig = {
    "unico_open": [ctypes.POINTER(_U), _S, ctypes.c_void_p, _R],
    "unico_close_checked": [_U, _R],
    "unico_result_clear": [_R],
    "unico_schema_apply": [_U, _S, _R],
    "unico_insert_with": [_U, _S, _S, ctypes.POINTER(_WriteOptions), _R],
    "unico_update_with": [_U, _S, _S, _S, ctypes.POINTER(_WriteOptions), _R],
    "unico_delete": [_U, _S, _S, ctypes.c_uint64, _S, _R],
    "unico_get": [_U, _S, _S, _R],
    "unico_lookup": [_U, _S, _S, _S, _R],
    "unico_reserve": [_U, _S, _S, _S, ctypes.c_uint64, _S, _R],
    "unico_release_hold": [_U, _S, _R],
    "unico_check": [_U, _R],
    "unico_batch_json": [_U, _S, _S, _R],
    "unico_submit": [_U, ctypes.POINTER(_Write), _DONE, ctypes.c_void_p],
    "unico_errname": [ctypes.c_int],
    "unico_strerror": [ctypes.c_int],
}
for _name, _args in _sig.items():
    _f = getattr(_lib, _name)
    _f.argtypes = _args
    _f.restype = ctypes.c_char_p if _name in ("unico_errname", "unico_strerror") else \
        (None if _name == "unico_result_clear" else ctypes.c_int)


def library_error_ids():
    """The error ids the loaded library knows (its UNICO_ERRNO_MAP), by code:
    unico_errname() of every code of unico's range (-40001 .. -41000) that
    is not the word it answers for codes outside the map ("error")."""
    out = {}
    for code in range(-40001, -41000, -1):
        name = _lib.unico_errname(code).decode()
        if name != "error":
            out[code] = name
    return out


def _check_map():
    lib_ids = set(library_error_ids().values())
    ours = set(ERRORS)
    if lib_ids != ours:
        raise ImportError("unico: this module and %s disagree on the error ids: "
                          "only in the library %s, only here %s"
                          % (library_path, sorted(lib_ids - ours), sorted(ours - lib_ids)))


_check_map()


def _b(s):
    return None if s is None else (s if isinstance(s, bytes) else str(s).encode())


def _j(v):
    """JSON text of a Python value (a str key stays a JSON string)."""
    return _json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode()


def _text(p):
    return None if not p else ctypes.string_at(p).decode()


def _error(rc, res):
    """The exception of a refused call's result (reads res only)."""
    rid = _lib.unico_errname(rc).decode()
    cls = ERRORS.get(rid, Error)
    msg = res.message.decode(errors="replace") or _lib.unico_strerror(rc).decode()
    kw = {"constraint": res.constraint.decode() or None,
          "column": res.column.decode() or None}
    body = _text(res.json)
    if cls is Conflict:
        v, o = _text(res.value), _text(res.owner)
        kw["value"] = _json.loads(v) if v else None
        kw["owner"] = _json.loads(o) if o else None
        kw["owner_table"] = res.owner_table.decode() or None
    elif cls is VersionMismatch:
        kw["current_version"] = res.version
    elif cls in (SchemaRefused, Corrupt):
        kw["report"] = _json.loads(body) if body else None
    return cls(rc, rid, msg, **kw)


def _raise(rc, res):
    raise _error(rc, res)


# insert_async: the writes submitted and not yet answered, by ticket (the
# ctx unico_submit hands back), with what C reads until then; one callback
# for all of them, which lives as long as the module
_submitted = {}
_submitted_seq = 0
_submitted_lock = __import__("threading").Lock()


def _settle(fut, ok, val):
    if not fut.done():  # (not when the coroutine was cancelled)
        if ok:
            fut.set_result(val)
        else:
            fut.set_exception(val)


@_DONE
def _on_done(ctx, resp):
    # on the submitting thread or the store's syncing thread: copy the
    # answer, hand it to the waiting loop, call no other unico function
    with _submitted_lock:
        entry = _submitted.pop(ctx or 0, None)
    if entry is None:
        return
    loop, fut, _w, _o = entry
    r = resp.contents
    if r.rc:
        ok, val = False, _error(r.rc, r)
    else:
        body = _text(r.json)
        ok, val = True, (_json.loads(body) if body else {})
    try:
        loop.call_soon_threadsafe(_settle, fut, ok, val)
    except RuntimeError:  # that loop is closed
        pass


class Database:
    """An open store (:func:`open`). A context manager: ``with`` closes it."""

    def __init__(self, url):
        h = _U()
        res = _Result()
        rc = _lib.unico_open(ctypes.byref(h), _b(url), None, ctypes.byref(res))
        try:
            if rc:
                _raise(rc, res)
        finally:
            _lib.unico_result_clear(ctypes.byref(res))
        self._h = h
        self.url = url

    def _call(self, fn, *args):
        if self._h is None:
            raise ValueError("unico: the database is closed")
        res = _Result()
        rc = fn(self._h, *args, ctypes.byref(res))
        try:
            if rc:
                _raise(rc, res)
            body = _text(res.json)
            return _json.loads(body) if body else {}
        finally:
            _lib.unico_result_clear(ctypes.byref(res))

    def close(self):
        """Close the store; raises :class:`Error` when it could not be left
        whole (the handle is closed either way). A second close does nothing."""
        if self._h is None:
            return
        h, self._h = self._h, None
        res = _Result()
        rc = _lib.unico_close_checked(h, ctypes.byref(res))
        try:
            if rc:
                _raise(rc, res)
        finally:
            _lib.unico_result_clear(ctypes.byref(res))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def apply_schema(self, ddl):
        """Set the schema to the DDL text; returns ``{"schema_version": N,
        "tables": [...], "changed": bool}``."""
        return self._call(_lib.unico_schema_apply, _b(ddl))

    @staticmethod
    def _opts(op_id=None, if_version=None, hold=None):
        o = _WriteOptions(1, _b(op_id), if_version or 0, None, 0)
        holds = [hold] if isinstance(hold, (str, bytes)) else list(hold or [])
        if holds:
            arr = (ctypes.c_char_p * len(holds))(*[_b(h) for h in holds])
            o.holds = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
            o.nholds = len(holds)
            o._keep = arr
        return o

    def insert(self, table, record, op_id=None, hold=None):
        """Insert ``record`` (a dict) into ``table``; returns ``{"pk": ...,
        "version": N}``. ``hold``: a hold token (or a list of them) whose
        reserved values the record takes."""
        o = self._opts(op_id, None, hold)
        return self._call(_lib.unico_insert_with, _b(table), _j(record), ctypes.byref(o))

    def update(self, table, key, patch, if_version=None, op_id=None, hold=None):
        """Change the columns of ``patch`` (a dict; None clears a column) of the
        record of primary key ``key`` (a scalar, or a list for a composite
        key); ``if_version``: only when it is at that version."""
        o = self._opts(op_id, if_version, hold)
        return self._call(_lib.unico_update_with, _b(table), _j(key), _j(patch),
                          ctypes.byref(o))

    async def _submit(self, kind, table, json_text, pk_json, o):
        # one write through unico_submit, answered on this loop once durable
        if self._h is None:
            raise ValueError("unico: the database is closed")
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        w = _Write(kind, _b(table), json_text, pk_json, ctypes.pointer(o),
                   None, 0, None, 0)
        with _submitted_lock:
            global _submitted_seq
            _submitted_seq += 1
            ticket = _submitted_seq
            _submitted[ticket] = (loop, fut, w, o)
        rc = _lib.unico_submit(self._h, ctypes.byref(w), _on_done, ticket)
        if rc < 0:
            with _submitted_lock:
                _submitted.pop(ticket, None)
            res = _Result()
            res.rc = rc
            raise _error(rc, res)
        return await fut

    async def insert_async(self, table, record, op_id=None, hold=None):
        """:meth:`insert` for asyncio, over ``unico_submit``: the write is
        decided at once (in this thread) and the coroutine is answered once
        it is durable (on the embedded store in log mode, by the sync that
        covers it, shared with other writes), with the same dict or
        exception as :meth:`insert`."""
        o = self._opts(op_id, None, hold)
        return await self._submit(_WRITE_INSERT, table, _j(record), None, o)

    async def update_async(self, table, key, patch, if_version=None, op_id=None,
                           hold=None):
        """:meth:`update` for asyncio, answered once durable as
        :meth:`insert_async` is."""
        o = self._opts(op_id, if_version, hold)
        return await self._submit(_WRITE_UPDATE, table, _j(patch), _j(key), o)

    async def delete_async(self, table, key, if_version=None, op_id=None):
        """:meth:`delete` for asyncio, answered once durable as
        :meth:`insert_async` is."""
        o = self._opts(op_id, if_version, None)
        return await self._submit(_WRITE_DELETE, table, None, _j(key), o)

    def delete(self, table, key, if_version=None, op_id=None):
        """Delete the record of primary key ``key``; returns ``{"pk": ...,
        "version": N}`` (the version deleted)."""
        return self._call(_lib.unico_delete, _b(table), _j(key), if_version or 0, _b(op_id))

    def get(self, table, key):
        """The record of ``key``: ``{"pk": ..., "version": N, "record": {...}}``."""
        return self._call(_lib.unico_get, _b(table), _j(key))

    def lookup(self, table, constraint, value):
        """The owner of ``value`` (a scalar, or a list: one element per column
        of the constraint) under the unique constraint ``constraint``:
        ``{"constraint": ..., "value": [...], "pk": ..., "version": N,
        "record": {...}}``; :class:`NotFound` when nobody holds it."""
        values = value if isinstance(value, (list, tuple)) else [value]
        return self._call(_lib.unico_lookup, _b(table), _b(constraint), _j(list(values)))

    def reserve(self, table, constraint, value, ttl_ms, op_id=None):
        """Hold ``value`` of ``constraint`` for ``ttl_ms`` ms: ``{"token": ...,
        "expires": ...}``; only a write presenting the token takes it."""
        values = value if isinstance(value, (list, tuple)) else [value]
        return self._call(_lib.unico_reserve, _b(table), _b(constraint), _j(list(values)),
                          ttl_ms, _b(op_id))

    def release(self, token):
        """Give up a hold before it expires."""
        return self._call(_lib.unico_release_hold, _b(token))

    def batch(self, ops, op_id=None):
        """Write several records all or nothing (``unico_batch``): ``ops`` is
        a list of dicts, ``{"op": "insert", "table": T, "record": {...}}``,
        ``{"op": "update", "table": T, "key": K, "patch": {...},
        "if_version": N}`` (``if_version`` optional), ``{"op": "delete",
        "table": T, "key": K}``. Unique values are judged against the state
        after the whole batch, so two records may swap their values. Returns
        ``{"results": [{"pk": ..., "version": N}, ...]}``, one per op. On a
        refusal nothing is written and the exception is the one the single
        write would raise, with ``.index`` (from 0), ``.op`` and ``.table``
        naming the op refused (None when no single op is to blame)."""
        if self._h is None:
            raise ValueError("unico: the database is closed")
        res = _Result()
        rc = _lib.unico_batch_json(self._h, _j(list(ops)), _b(op_id), ctypes.byref(res))
        try:
            if rc:
                e = _error(rc, res)
                body = _text(res.json)
                try:
                    rep = _json.loads(body) if body else None
                except ValueError:
                    rep = None
                rep = rep if isinstance(rep, dict) else {}
                e.index, e.op, e.table = rep.get("index"), rep.get("op"), rep.get("table")
                raise e
            body = _text(res.json)
            return _json.loads(body) if body else {}
        finally:
            _lib.unico_result_clear(ctypes.byref(res))

    def check(self):
        """Verify records and claims agree; the report, or :class:`Corrupt`
        (with ``.report``) when they do not."""
        return self._call(_lib.unico_check)


def open(url):
    """Open the store at ``url`` (``lmdb:DIR``, ``dynamodb://...``,
    ``cassandra://...``, as the CLI's --store)."""
    return Database(url)
