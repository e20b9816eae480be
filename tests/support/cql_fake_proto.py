"""cql_fake_proto.py - the CQL v4 wire format of the stand-in server
(cql_fake_server.py): protocol constants, the encoders of its answers,
the errors it answers with, and the readers of request bodies."""

import struct


# ---------------------------------------------------------------------------
# protocol constants

VERSION = 4
RESP_VERSION = 0x84
MAX_BODY = 256 * 1024 * 1024

OP_ERROR, OP_STARTUP, OP_READY, OP_AUTHENTICATE = 0x00, 0x01, 0x02, 0x03
OP_OPTIONS, OP_SUPPORTED, OP_QUERY, OP_RESULT = 0x05, 0x06, 0x07, 0x08
OP_PREPARE, OP_EXECUTE, OP_REGISTER, OP_EVENT = 0x09, 0x0A, 0x0B, 0x0C
OP_BATCH, OP_AUTH_CHALLENGE, OP_AUTH_RESPONSE, OP_AUTH_SUCCESS = 0x0D, 0x0E, 0x0F, 0x10

OPNAMES = {0x00: "ERROR", 0x01: "STARTUP", 0x02: "READY", 0x03: "AUTHENTICATE",
           0x05: "OPTIONS", 0x06: "SUPPORTED", 0x07: "QUERY", 0x08: "RESULT",
           0x09: "PREPARE", 0x0A: "EXECUTE", 0x0B: "REGISTER", 0x0C: "EVENT",
           0x0D: "BATCH", 0x0E: "AUTH_CHALLENGE", 0x0F: "AUTH_RESPONSE",
           0x10: "AUTH_SUCCESS"}
REQUEST_OPS = {OP_STARTUP, OP_OPTIONS, OP_QUERY, OP_PREPARE, OP_EXECUTE,
               OP_REGISTER, OP_BATCH, OP_AUTH_RESPONSE}

E_SERVER, E_PROTOCOL, E_BAD_CREDENTIALS = 0x0000, 0x000A, 0x0100
E_UNAVAILABLE, E_WRITE_TIMEOUT, E_READ_TIMEOUT = 0x1000, 0x1100, 0x1200
E_SYNTAX, E_INVALID, E_CONFIG = 0x2000, 0x2200, 0x2300
E_ALREADY_EXISTS, E_UNPREPARED = 0x2400, 0x2500

CL_NAMES = ["ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM",
            "EACH_QUORUM", "SERIAL", "LOCAL_SERIAL", "LOCAL_ONE"]
ANY, ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM = range(8)
SERIAL, LOCAL_SERIAL, LOCAL_ONE = 8, 9, 10

# type [option]s
T_BIGINT = b"\x00\x02"
T_BLOB = b"\x00\x03"
T_BOOLEAN = b"\x00\x04"
T_INT = b"\x00\x09"
T_VARCHAR = b"\x00\x0d"
T_DOUBLE = b"\x00\x07"
T_TIMESTAMP = b"\x00\x0b"
T_UUID = b"\x00\x0c"
T_TINYINT = b"\x00\x14"
T_COUNTER = b"\x00\x05"
T_MAP_TEXT_TEXT = b"\x00\x21\x00\x0d\x00\x0d"
TYPES = {"blob": T_BLOB, "bigint": T_BIGINT, "int": T_INT,
         "boolean": T_BOOLEAN, "text": T_VARCHAR, "varchar": T_VARCHAR,
         "double": T_DOUBLE, "timestamp": T_TIMESTAMP, "uuid": T_UUID,
         "tinyint": T_TINYINT, "counter": T_COUNTER}
TYPE_NAMES = {T_BLOB: "blob", T_BIGINT: "bigint", T_INT: "int",
              T_BOOLEAN: "boolean", T_VARCHAR: "text", T_DOUBLE: "double",
              T_TIMESTAMP: "timestamp", T_UUID: "uuid", T_TINYINT: "tinyint",
              T_COUNTER: "counter",
              T_MAP_TEXT_TEXT: "map<text, text>"}

UNSET = object()  # a v4 "not set" bound value ([bytes] length -2)

UNPREPARED_MSG = ("Prepared query with ID %s not found (either the query was "
                  "not prepared on this host (maybe the host has been "
                  "restarted?) or you have prepared too many queries and it "
                  "has been evicted from the internal cache)")
PAGING_MAGIC = b"UFK1"

# ---------------------------------------------------------------------------
# encoding


def u16(v):
    return struct.pack(">H", v)


def i32(v):
    return struct.pack(">i", v)


def string(s):
    b = s.encode() if isinstance(s, str) else s
    return u16(len(b)) + b


def long_string(s):
    b = s.encode()
    return i32(len(b)) + b


def value(b):
    """[bytes]; None is null."""
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def short_bytes(b):
    return u16(len(b)) + b


def string_list(items):
    return u16(len(items)) + b"".join(string(s) for s in items)


def string_multimap(d):
    return u16(len(d)) + b"".join(string(k) + string_list(v) for k, v in d)


def frame(stream, opcode, body, flags=0, version=RESP_VERSION):
    return struct.pack(">BBhBI", version, flags, stream, opcode, len(body)) + body


class CqlError(Exception):
    """An ERROR answer: code, message and the code's details (bytes)."""

    def __init__(self, code, msg, extra=b"", close=False):
        super().__init__(msg)
        self.code, self.msg, self.extra, self.close = code, msg, extra, close

    def body(self):
        return i32(self.code) + string(self.msg) + self.extra


def invalid(msg):
    return CqlError(E_INVALID, msg)


def protocol(msg, close=False):
    return CqlError(E_PROTOCOL, msg, close=close)


class Drop(Exception):
    """Close the connection without answering (the drop fault)."""


def rows_metadata(ks, table, specs, paging_state=None, skip=False):
    """ROWS / PREPARED result metadata: flags, count, [paging state],
    [global table spec], column specs."""
    flags = 0x0001 if specs else 0
    if paging_state is not None:
        flags |= 0x0002
    if skip:
        flags |= 0x0004
    out = i32(flags) + i32(len(specs))
    if paging_state is not None:
        out += value(paging_state)
    if not skip:
        if specs:
            out += string(ks) + string(table)
        for name, typ in specs:
            out += string(name) + typ
    return out


NO_METADATA = i32(0x0004) + i32(0)


def rows_body(ks, table, specs, rows, paging_state=None, skip=False):
    out = i32(2) + rows_metadata(ks, table, specs, paging_state, skip)
    out += i32(len(rows))
    for r in rows:
        out += b"".join(value(c) for c in r)
    return out


def bind_metadata(ks, table, specs, pk_indexes):
    glob = bool(specs)
    out = i32(1 if glob else 0) + i32(len(specs))
    if glob and pk_indexes is not None:
        out += i32(len(pk_indexes)) + b"".join(u16(i) for i in pk_indexes)
    else:
        out += i32(0)
    if glob:
        out += string(ks) + string(table)
    for name, typ in specs:
        out += string(name) + typ
    return out


VOID = i32(1)


def schema_change(change, target, ks, name=None):
    out = string(change) + string(target) + string(ks)
    if name is not None:
        out += string(name)
    return out


# ---------------------------------------------------------------------------
# decoding requests


class Reader:
    def __init__(self, data, what):
        self.d, self.o, self.what = data, 0, what

    def need(self, n, field):
        if n < 0 or len(self.d) - self.o < n:
            raise protocol("Malformed %s body: %s needs %d bytes, %d left"
                           % (self.what, field, n, len(self.d) - self.o), True)

    def u8(self, field):
        self.need(1, field)
        self.o += 1
        return self.d[self.o - 1]

    def u16(self, field):
        self.need(2, field)
        self.o += 2
        return struct.unpack_from(">H", self.d, self.o - 2)[0]

    def i32(self, field):
        self.need(4, field)
        self.o += 4
        return struct.unpack_from(">i", self.d, self.o - 4)[0]

    def i64(self, field):
        self.need(8, field)
        self.o += 8
        return struct.unpack_from(">q", self.d, self.o - 8)[0]

    def raw(self, n, field):
        self.need(n, field)
        self.o += n
        return self.d[self.o - n:self.o]

    def text(self, b, field):
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            raise protocol("Malformed %s body: %s is not valid UTF-8"
                           % (self.what, field), True)

    def string(self, field):
        return self.text(self.raw(self.u16(field), field), field)

    def long_string(self, field):
        n = self.i32(field)
        if n < 0:
            raise protocol("Malformed %s body: negative length %d for %s"
                           % (self.what, n, field), True)
        return self.text(self.raw(n, field), field)

    def bytes_(self, field, allow_unset=False):
        n = self.i32(field)
        if n == -1:
            return None
        if n == -2 and allow_unset:
            return UNSET
        if n < 0:
            raise protocol("Malformed %s body: invalid length %d for %s"
                           % (self.what, n, field), True)
        return self.raw(n, field)

    def short_bytes(self, field):
        return self.raw(self.u16(field), field)

    def string_map(self, field):
        return {self.string(field + " key"): self.string(field + " value")
                for _ in range(self.u16(field))}

    def string_list(self, field):
        return [self.string(field) for _ in range(self.u16(field))]

    def end(self):
        if self.o != len(self.d):
            raise protocol("Malformed %s body: %d trailing bytes"
                           % (self.what, len(self.d) - self.o), True)


class Params:
    """v4 query parameters."""

    def __init__(self, r):
        self.consistency = r.u16("consistency")
        if self.consistency > LOCAL_ONE:
            raise protocol("Unknown code %d for a consistency level"
                           % self.consistency, True)
        self.flags = r.u8("query flags")
        if self.flags & 0x80:
            raise protocol("Unknown query flags 0x%02x" % self.flags, True)
        self.values, self.names = [], None
        if self.flags & 0x01:
            n = r.u16("value count")
            if self.flags & 0x40:
                self.names = []
            for _ in range(n):
                if self.names is not None:
                    self.names.append(r.string("value name"))
                self.values.append(r.bytes_("value", allow_unset=True))
        elif self.flags & 0x40:
            raise protocol("Names for values (0x40) without values (0x01)", True)
        self.skip_metadata = bool(self.flags & 0x02)
        self.page_size = r.i32("page size") if self.flags & 0x04 else None
        self.paging_state = r.bytes_("paging state") if self.flags & 0x08 else None
        self.serial = SERIAL
        if self.flags & 0x10:
            self.serial = r.u16("serial consistency")
            if self.serial > LOCAL_ONE:
                raise protocol("Unknown code %d for a consistency level"
                               % self.serial, True)
        self.timestamp = r.i64("timestamp") if self.flags & 0x20 else None
