#!/usr/bin/env python3
"""cql_fake_server.py - a small stand-in Cassandra speaking the CQL native
protocol v4, for driving the cassandra store's socket path in CI (no JVM, no
Cassandra). Python 3 standard library only.

    python3 tests/support/cql_fake_server.py [--port 0] [--port-file PATH]
        [--auth USER:PASS] [--seed N] [--reorder] [--delay-ms N]
        [--drop P] [--timeout P] [--unavailable P] [--unprepared P]
        [--read-faults] [--nodes N] [--dcs DC,DC] [--stats-file PATH]
        [--trace FILE] [-v]
        [--tls-cert PEM --tls-key PEM [--tls-client-ca PEM] [--tls12]]

Listens on 127.0.0.1 (--port 0: a free port), writes the port to --port-file
(atomically: a temporary file renamed) or prints "PORT <n>" on stdout, and
serves every connection on its own thread until SIGTERM / SIGINT.

What it answers, byte-compatible with Apache Cassandra 4.0.7 for the same
requests (checked against the frames recorded in tests/data/cql-captures;
tests/cql_fake_check.sh embeds the frames it compares with):

- OPTIONS -> SUPPORTED {PROTOCOL_VERSIONS: [4/v4], COMPRESSION: [],
  CQL_VERSION: [3.4.5]} (what this server speaks; a real 4.0.7 lists
  3/v3..6/v6-beta and snappy, lz4). STARTUP -> READY, or with --auth
  AUTHENTICATE PasswordAuthenticator, AUTH_RESPONSE (SASL PLAIN) ->
  AUTH_SUCCESS (null token) or ERROR 0x0100. REGISTER -> READY (and EVENT
  SCHEMA_CHANGE frames, stream -1, on schema changes).
- QUERY / PREPARE / EXECUTE with the full v4 query parameters (consistency,
  flags, positional or named values incl. null and unset, page_size,
  paging_state, serial consistency, default timestamp). PREPARE ids are
  md5(query) (md5(keyspace + query) after USE), shared by all connections,
  as in Cassandra; DROP TABLE forgets the table's statements.
- A CQL subset, parsed by a small tokenizer (any whitespace / case,
  "quoted" identifiers, comments, a trailing ';'):
    CREATE KEYSPACE [IF NOT EXISTS] ks WITH replication = {...}
        [AND durable_writes = ...]   (SimpleStrategy, NetworkTopologyStrategy)
    CREATE TABLE [IF NOT EXISTS] [ks.]t (col type [PRIMARY KEY | STATIC], ...
        [, PRIMARY KEY (col, ...) | PRIMARY KEY ((col), col, ...)]) [WITH ...]
        (a partition key of one or more columns, then clustering columns;
        types blob,
        bigint, int, tinyint, boolean, text/varchar, uuid, timestamp,
        double, counter (alone beside the key, and never written here);
        a STATIC column, in a table with clustering columns, holds
        one cell per partition that every row of it reads, kept when the
        rows are deleted; a partition left with only static cells is one
        row of a scan or partition read, its clustering and regular
        columns null, as in Cassandra; static cells never expire here)
    ALTER TABLE [ks.]t ADD col type | ADD (col type, ...)  (UPDATED TABLE)
    DROP TABLE|KEYSPACE [IF EXISTS] name;  USE ks
    SELECT *|cols FROM [ks.]t [WHERE key = term [AND key2 = term ...]] [LIMIT n]
        (cols may be TTL(col): named ttl(col), int, the seconds the cell
        has left or null; and WRITETIME(col): named writetime(col), bigint,
        the microseconds since the epoch the cell was written at, or null:
        a plain write's time is the client's default timestamp when the
        request carries one (else the server's clock), a conditional
        one's the server's clock in whole milliseconds (a Paxos ballot's,
        as the capture ttl_insert shows); neither on a key column; WHERE on the partition key alone reads the
        whole partition in key order)
    SELECT cols FROM system_schema.keyspaces [WHERE keyspace_name = term]
    SELECT cols FROM system_schema.columns [WHERE keyspace_name = term
        AND table_name = term]  (column_name, kind, position, type, ...)
    SELECT cols FROM system.local | system.peers | system.peers_v2
        (this one node, no peers: enough for drivers' control connections)
    INSERT INTO [ks.]t (cols) VALUES (terms) [IF NOT EXISTS] [USING TTL term]
    UPDATE [ks.]t [USING TTL term] SET col = term, ... WHERE key = term [AND ...]
        [IF EXISTS | IF col = term AND ...]   (IF col = null holds on an
        absent row, as in Cassandra)
    DELETE [cols] FROM [ks.]t WHERE key = term [AND ...]
        [IF EXISTS | IF col = term AND ...]
  (term: ?, an integer, 'string', 0xblob, true, false, null). Anything else
  is ERROR 0x2000 (Syntax_error) naming the statement.
- LWT answers as Cassandra: ROWS whose first column is [applied] boolean;
  not applied IF NOT EXISTS: [applied] then the existing row (partition
  key, then the regular columns in alphabetical order); not applied IF
  col = ...: [applied] then the condition's columns in IF order; no row:
  [applied] only. Prepared LWTs (and other writes) have NO_METADATA result
  metadata. SKIP_METADATA is honoured for plain SELECTs only (0x0005).
- A full scan returns rows in hash order (md5 of the key standing in for the
  Murmur3 token: unordered, like Cassandra) and pages by page_size with
  HAS_MORE_PAGES and an opaque paging_state (a full last page is followed by
  an empty one, as a real range pager does).
- Errors with Cassandra 4.0.7's codes, bodies and texts: Invalid (unknown
  table: "table t does not exist"; bad bigint: "Expected 8 or 0 byte long
  (4)"; SERIAL as commit consistency; serial consistency not SERIAL or
  LOCAL_SERIAL; ...), Already_exists, Unprepared (with the id),
  Unavailable, Write_timeout / Read_timeout, Protocol errors.
- USING TTL as Cassandra keeps it: per cell (and the row marker of an
  INSERT), a write without TTL making the cells it writes permanent, a row
  gone once neither its marker nor a cell is left; the marker of USING
  TTL ? is [ttl] int; 0 means no TTL.

Data: keyspaces {name -> replication}; tables {(ks, t) -> schema, rows}.
One global lock makes every request atomic (linearizable).

Faults, each a probability decided per write request (INSERT, UPDATE,
DELETE; with --read-faults also per SELECT) with one PRNG seeded by --seed
(printed on stderr when not given):
  --unprepared P  EXECUTE -> ERROR 0x2500 Unprepared, the id forgotten
                  (checked first: Cassandra looks the id up first)
  --unavailable P ERROR 0x1000, nothing applied; consistency = the request's
                  (SERIAL -> QUORUM, LOCAL_SERIAL -> LOCAL_QUORUM for LWTs and
                  serial reads, as 4.0.7 does), required = its block-for,
                  alive = required - 1
  --timeout P     ERROR 0x1100 Write_timeout, having applied the write with
                  probability 1/2 (LWT: consistency = the serial consistency,
                  received 0, blockfor = its quorum of the keyspace's RF,
                  write type CAS; plain write: write type SIMPLE). A read
                  gets ERROR 0x1200 Read_timeout instead.
  --drop P        apply, then close the connection without answering
  --delay-ms N    sleep 0..N ms before answering any request
  --reorder       every request on its own thread after a 0..3 ms sleep, so
                  pipelined requests are answered out of order
Validation errors come before faults (as in Cassandra, where Invalid is
raised before a request reaches replicas).

TLS (client encryption, as cassandra.yaml's client_encryption_options):
--tls-cert and --tls-key make every connection TLS (Python's ssl module:
TLS 1.2 or 1.3); --tls-client-ca also demands a client certificate signed
by that CA (require_client_auth); --tls12 caps the version at TLS 1.2
(where a missing client certificate fails the handshake itself, while
TLS 1.3 refuses the connection after it). A connection whose handshake fails is
closed and counted (stats "tls": handshakes, failures, the SNI names
received, "-" for none). Not with --reorder (one SSL object may not be
used by two threads at once).

A malformed frame (bad version, length, opcode or body) gets ERROR 0x000A
and the connection is closed; one line per connection error on stderr.
--stats-file PATH gets JSON counts (requests by opcode and statement kind,
LWT outcomes, faults, errors, connections) at exit.

The wire format is cql_fake_proto.py, the CQL parser cql_fake_parse.py.

This server is stricter than Cassandra in one place: trailing bytes after
a request body are a protocol error (they betray an encoder bug).
"""

import argparse
import hashlib
import heapq
import json
import os
import random
import re
import signal
import socket
import ssl
import struct
import sys
import threading
import time

# the wire format and the CQL parser: modules of their own beside this
# file (the folder of the running script is on sys.path)
from cql_fake_proto import (
    VERSION, RESP_VERSION, MAX_BODY, OP_ERROR, OP_STARTUP, OP_READY,
    OP_AUTHENTICATE, OP_OPTIONS, OP_SUPPORTED, OP_QUERY, OP_RESULT,
    OP_PREPARE, OP_EXECUTE, OP_REGISTER, OP_EVENT, OP_BATCH, OP_AUTH_RESPONSE,
    OP_AUTH_SUCCESS, OPNAMES, REQUEST_OPS, E_SERVER, E_PROTOCOL,
    E_BAD_CREDENTIALS, E_UNAVAILABLE, E_WRITE_TIMEOUT, E_READ_TIMEOUT,
    E_SYNTAX, E_CONFIG, E_ALREADY_EXISTS, E_UNPREPARED, CL_NAMES, ANY, ONE,
    TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, SERIAL, LOCAL_SERIAL, LOCAL_ONE,
    T_BIGINT, T_BLOB, T_BOOLEAN, T_INT, T_VARCHAR, T_DOUBLE, T_TIMESTAMP,
    T_UUID, T_TINYINT, T_MAP_TEXT_TEXT, TYPES, TYPE_NAMES, UNSET, UNPREPARED_MSG,
    PAGING_MAGIC, u16, i32, string, value, short_bytes, string_list,
    string_multimap, frame, CqlError, invalid, protocol, Drop, rows_metadata,
    NO_METADATA, rows_body, bind_metadata, VOID, schema_change, Reader,
    Params)
from cql_fake_parse import Parser


# ---------------------------------------------------------------------------
# data


class Table:
    """pk: the key's columns, the partition key first, then clustering
    columns. A row's key is the partition key's bytes (one column) or the
    key columns' bytes, each with a 2-byte length (several)."""

    def __init__(self, ks, name, coldefs, pk, statics=(), npart=1):
        self.ks, self.name = ks, name
        # static columns: one cell per partition, shared by its rows (and
        # kept when they are deleted); these never expire here
        self.statics = set(statics)
        self.srows = {}  # partition key bytes -> {static col: bytes}
        self.pks = list(pk) if isinstance(pk, (list, tuple)) else [pk]
        self.pk = self.pks[0]
        self.npart = npart  # the partition key: the first npart of pks
        self.part_cols = self.pks[:npart]
        self.types = dict(coldefs)
        self.coldefs = list(coldefs)
        self.reorder()
        self.rows = {}  # key bytes -> {"_marker": bool, col: bytes}
        self.ttl = {}   # key bytes -> {col or "_marker": expiry (unix s)}
        self.wt = {}    # key bytes -> {col: write time (us since the epoch)}
        self.due = []   # heap of (expiry, key)

    def expire(self, now):
        """Drop the cells (and row markers) whose TTL ran out, and the rows
        left with neither."""
        while self.due and self.due[0][0] <= now:
            _, key = heapq.heappop(self.due)
            cells = self.ttl.get(key)
            row = self.rows.get(key)
            if not cells or row is None:
                continue
            for c in [c for c, d in cells.items() if d <= now]:
                del cells[c]
                self.wt.get(key, {}).pop(c, None)
                if c == "_marker":
                    row["_marker"] = False
                else:
                    row.pop(c, None)
            if not cells:
                del self.ttl[key]
            if not row.get("_marker") and len(row) - ("_marker" in row) == 0:
                self.rows.pop(key, None)
                self.ttl.pop(key, None)
                self.wt.pop(key, None)

    def stamp(self, key, cols, ttl, now):
        """Cells cols of key just written: expiring after ttl seconds, or
        (ttl 0) for good."""
        if ttl:
            cells = self.ttl.setdefault(key, {})
            for c in cols:
                cells[c] = now + ttl
            heapq.heappush(self.due, (now + ttl, key))
        elif key in self.ttl:
            cells = self.ttl[key]
            for c in cols:
                cells.pop(c, None)
            if not cells:
                del self.ttl[key]

    def reorder(self):
        # the key columns, then the regular columns in alphabetical order
        self.order = self.pks + sorted((c for c in self.types if c not in self.pks),
                                       key=lambda c: c.encode())

    def make_key(self, parts):
        if len(self.pks) == 1:
            return parts[0]
        return b"".join(struct.pack(">H", len(p)) + p for p in parts)

    def key_part(self, key, col):
        if len(self.pks) == 1:
            return key
        i = 0
        for c in self.pks:
            n = struct.unpack(">H", key[i:i + 2])[0]
            if c == col:
                return key[i + 2:i + 2 + n]
            i += 2 + n
        return None

    def part(self, key):
        """The partition key's parts (a tuple of bytes)."""
        return tuple(self.key_part(key, c) for c in self.part_cols)

    def cell(self, key, row, col, now=None):
        if col.startswith("writetime("):  # WRITETIME(c): when c was written
            c = col[10:-1]
            w = self.wt.get(key, {}).get(c)
            if w is None or row.get(c) is None:
                return None
            return struct.pack(">q", w)
        if col.startswith("ttl("):  # TTL(c): the seconds c has left, or null
            c = col[4:-1]
            exp = self.ttl.get(key, {}).get(c)
            if exp is None or row.get(c) is None:
                return None
            return struct.pack(">i", max(0, int(exp - (now or time.time()) + 0.999)))
        if col in self.pks:
            if row.get("_static_only") and col not in self.part_cols:
                return None  # a partition holding only static cells
            return self.key_part(key, col)
        if col in self.statics:
            return self.srows.get(self.part(key), {}).get(col)
        return row.get(col)

    def scan_items(self):
        """(key, row) of every row, and of every partition that holds only
        static cells (one row, its clustering columns and regular cells
        null: what Cassandra returns for it)."""
        items = list(self.rows.items())
        if self.srows:
            parts = {self.part(k) for k in self.rows}
            for p, cells in self.srows.items():
                if cells and p not in parts:
                    key = self.make_key(list(p) + [b""] * (len(self.pks) - self.npart))
                    items.append((key, {"_static_only": True}))
        return items

    def type(self, col):
        if col.startswith("writetime("):
            c = col[10:-1]
            self.type(c)
            if c in self.pks:
                raise invalid("Cannot use selection function writeTime on PRIMARY KEY "
                              "part %s" % c)
            return T_BIGINT
        if col.startswith("ttl("):
            c = col[4:-1]
            self.type(c)
            if c in self.pks:
                raise invalid("Cannot use selection function ttl on PRIMARY KEY part %s"
                              % c)
            return T_INT
        if col not in self.types:
            raise invalid("Undefined column name %s in table %s.%s"
                          % (col, self.ks, self.name))
        return self.types[col]


KS_SCHEMA = {"keyspace_name": T_VARCHAR, "durable_writes": T_BOOLEAN,
             "replication": T_MAP_TEXT_TEXT}
KS_ORDER = ["keyspace_name", "durable_writes", "replication"]


def encode_literal(term, typ, col):
    _, kind, text = term
    if kind == "null":
        return None
    tn = TYPE_NAMES.get(typ, "?")

    def bad():
        names = {"num": "INTEGER", "str": "STRING", "blob": "HEX", "bool": "BOOLEAN"}
        raw = {"str": "'%s'" % text, "blob": "0x" + (text.hex() if kind == "blob" else "")
               }.get(kind, text)
        return invalid("Invalid %s constant (%s) for \"%s\" of type %s"
                       % (names[kind], raw, col, tn))

    if typ == T_DOUBLE:
        if kind != "num":
            raise bad()
        return struct.pack(">d", float(text))
    if typ in (T_BIGINT, T_INT, T_TIMESTAMP, T_TINYINT):
        if kind != "num" or "." in text:
            raise bad()
        n = int(text)
        try:
            return struct.pack({T_INT: ">i", T_TINYINT: ">b"}.get(typ, ">q"), n)
        except struct.error:
            raise invalid("Unable to make %s from '%s'" % (tn, text))
    if typ == T_BLOB:
        if kind != "blob":
            raise bad()
        return text
    if typ == T_VARCHAR:
        if kind != "str":
            raise bad()
        return text.encode()
    if typ == T_BOOLEAN:
        if kind != "bool":
            raise bad()
        return b"\x01" if text == "true" else b"\x00"
    raise bad()


def validate_value(b, typ, col):
    if b is None or b is UNSET:
        return b
    n = len(b)
    if typ == T_BIGINT and n not in (0, 8):
        raise invalid("Expected 8 or 0 byte long (%d)" % n)
    if typ == T_INT and n not in (0, 4):
        raise invalid("Expected 4 or 0 byte int (%d)" % n)
    if typ == T_BOOLEAN and n not in (0, 1):
        raise invalid("Expected 1 or 0 byte value for a boolean (%d)" % n)
    if typ == T_UUID and n not in (0, 16):
        raise invalid("UUID should be 16 or 0 bytes (%d)" % n)
    if typ == T_DOUBLE and n not in (0, 8):
        raise invalid("Expected 8 or 0 byte value for a double (%d)" % n)
    if typ == T_TIMESTAMP and n not in (0, 8):
        raise invalid("Expected 8 or 0 byte long for date (%d)" % n)
    if typ == T_TINYINT and n not in (0, 1):
        raise invalid("Expected 1 byte for a tinyint (%d)" % n)
    if typ == T_VARCHAR:
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            raise invalid("Invalid UTF-8 bytes %s" % b.hex())
    return b


def hash_order(k):
    return (hashlib.md5(k).digest(), k)


def quorum(n):
    return n // 2 + 1


# ---------------------------------------------------------------------------
# the server


class Server:
    def __init__(self, args):
        self.args = args
        self.lock = threading.RLock()  # the data: every request atomic
        self.keyspaces = {}            # name -> {"replication": {..}, "durable": bool}
        self.tables = {}               # (ks, t) -> Table
        self.prepared = {}             # id -> (stmt, keyspace at prepare)
        self.conns = set()
        self.conns_lock = threading.Lock()
        self.seed = args.seed if args.seed is not None else random.randrange(1 << 31)
        self.rng = random.Random(self.seed)
        self.rng_lock = threading.Lock()
        self.stats_lock = threading.Lock()
        self.stats = {"seed": self.seed, "connections": 0, "requests": {},
                      "statements": {}, "lwt": {"applied": 0, "not_applied": 0},
                      "faults": {"drop": 0, "timeout": 0, "timeout_applied": 0,
                                 "unavailable": 0, "unprepared": 0, "delayed": 0},
                      "errors": {}, "connection_errors": 0,
                      "tls": {"handshakes": 0, "failures": 0, "sni": []}}
        self.tls_ctx = None
        if args.tls_cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(args.tls_cert, args.tls_key)
            if args.tls12:
                ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            if args.tls_client_ca:
                ctx.verify_mode = ssl.CERT_REQUIRED
                ctx.load_verify_locations(args.tls_client_ca)

            def sni(_sslobj, name, _ctx):
                with self.stats_lock:
                    self.stats["tls"]["sni"].append(name or "-")
            ctx.sni_callback = sni
            self.tls_ctx = ctx
        self.dcs = [d for d in (args.dcs or "").split(",") if d]
        self.stopping = False
        self.conn_ids = 0
        self.trace_f = open(args.trace, "a") if args.trace else None

    # -- helpers

    def count(self, section, key, n=1):
        with self.stats_lock:
            d = self.stats[section]
            d[key] = d.get(key, 0) + n

    def rand(self):
        with self.rng_lock:
            return self.rng.random()

    def chance(self, p):
        return p > 0 and self.rand() < p

    def trace(self, t, st, key, ok, sets, ttl):
        """One line per write to --trace FILE (under self.lock): when, the
        table, the key, the statement, whether it applied, what it set."""
        if not self.trace_f:
            return
        cells = " ".join("%s=%s" % (c, "null" if v is None else "unset" if v is UNSET
                                    else repr(bytes(v)))
                         for c, v in sets)
        self.trace_f.write("%.6f %s.%s %s %s%s %s%s %s\n" % (
            time.time(), t.ks, t.name, repr(key), st.kind,
            " IF" if st.lwt else "", "applied" if ok else "not_applied",
            " ttl=%d" % ttl if ttl else "", cells))
        self.trace_f.flush()

    def trace_fault(self, what):
        """The fault the last traced write's answer met (--trace)."""
        if self.trace_f:
            self.trace_f.write("%.6f FAULT %s\n" % (time.time(), what))
            self.trace_f.flush()

    def log(self, msg):
        sys.stderr.write("cql_fake_server: %s\n" % msg)
        sys.stderr.flush()

    def broadcast_events(self, events):
        if not events:
            return
        with self.conns_lock:
            targets = [c for c in self.conns if "SCHEMA_CHANGE" in c.events]
        for c in targets:
            for body in events:
                c.send(frame(-1, OP_EVENT, string("SCHEMA_CHANGE") + body))

    # -- statements

    def parse(self, text):
        try:
            return Parser(text).parse()
        except CqlError:
            raise
        except Exception as e:  # a parser bug must not look like a server crash
            raise CqlError(E_SYNTAX, "cql_fake_server cannot parse %r: %s" % (text[:200], e))

    def bind_info(self, st, conn_ks):
        """(keyspace, table name, marker specs, pk indexes, result specs or
        None for NO_METADATA). Raises Invalid for unknown tables/columns."""
        if st.kind == "select_ks":
            specs = [(c, KS_SCHEMA.get(c) or self._undefined(c, "system_schema", "keyspaces"))
                     for c in st.marker_cols]
            pk = [i for i, c in enumerate(st.marker_cols) if c == "keyspace_name"][:1] or None
            cols = st.cols if st.cols is not None else KS_ORDER
            res = [(c, KS_SCHEMA.get(c) or self._undefined(c, "system_schema", "keyspaces"))
                   for c in cols]
            return "system_schema", "keyspaces", specs, pk, res
        if st.kind in ("select", "insert", "update", "delete"):
            t = self.table(st, conn_ks)
            specs = [(c, T_INT if c == "[ttl]" else t.type(c)) for c in st.marker_cols]
            pk = None
            terms = dict(zip(st.cols, st.terms)) if st.kind == "insert" else \
                dict(([st.where] + st.where_more) if st.where else [])
            idx = [terms[c][1] for c in t.part_cols
                   if c in terms and terms[c][0] == "m"]
            if len(idx) == len(t.part_cols):
                pk = idx
            res = None
            if st.kind == "select":
                res = [(c, t.type(c)) for c in (st.cols if st.cols is not None else t.order)]
            return t.ks, t.name, specs, pk, res
        return "", "", [], None, None

    @staticmethod
    def _undefined(c, ks, t):
        raise invalid("Undefined column name %s in table %s.%s" % (c, ks, t))

    def table(self, st, conn_ks):
        ks = st.ks or conn_ks
        if ks is None:
            raise invalid("No keyspace has been specified. USE a keyspace, or "
                          "explicitly specify keyspace.tablename")
        if ks not in self.keyspaces:
            raise invalid("keyspace %s does not exist" % ks)
        t = self.tables.get((ks, st.table))
        if t is None:
            raise invalid("table %s does not exist" % st.table)
        t.expire(time.time())
        return t

    def term_value(self, term, values, typ, col):
        if term[0] == "m":
            return validate_value(values[term[1]], typ, col)
        return encode_literal(term, typ, col)

    def key_value(self, t, term, values, col=None):
        col = col or t.pk
        k = self.term_value(term, values, t.types[col], col)
        if k is UNSET:
            raise invalid("Invalid unset value for column %s" % col)
        if k is None:
            raise invalid("Invalid null value in condition for column %s" % col)
        if len(k) == 0 and col == t.pk and t.npart == 1:
            raise invalid("Key may not be empty")
        if len(k) > 65535:
            raise invalid("Key length of %d is longer than maximum of 65535" % len(k))
        return k

    def where_key(self, t, st, values, what="partition key"):
        """The row key a WHERE names: every key column, each once."""
        conds = [st.where] + st.where_more
        got = {}
        for col, term in conds:
            t.type(col)
            if col not in t.pks:
                raise invalid("Non PRIMARY KEY columns found in where clause: %s" % col)
            if col in got:
                raise invalid("%s cannot be restricted by more than one relation if "
                              "it includes an Equal" % col)
            got[col] = self.key_value(t, term, values, col)
        missing = [c for c in t.pks if c not in got]
        if missing:
            raise invalid("Some %s parts are missing: %s"
                          % ("partition key" if missing[0] in t.part_cols
                             else "clustering key",
                             ", ".join(missing)))
        return t.make_key([got[c] for c in t.pks])

    def select_sys(self, st):
        """system.local (this one node) and system.peers / peers_v2 (no
        other node), for drivers' control connections."""
        T_INET = b"\x00\x10"
        if st.table == "local":
            spec = [("key", T_VARCHAR, b"local"), ("bootstrapped", T_VARCHAR, b"COMPLETED"),
                    ("broadcast_address", T_INET, b"\x7f\x00\x00\x01"),
                    ("cluster_name", T_VARCHAR, b"cql_fake_server"),
                    ("cql_version", T_VARCHAR, b"3.4.5"),
                    ("data_center", T_VARCHAR,
                     (self.dcs[0] if self.dcs else "datacenter1").encode()),
                    ("host_id", T_UUID, hashlib.md5(b"fake-host").digest()),
                    ("listen_address", T_INET, b"\x7f\x00\x00\x01"),
                    ("native_protocol_version", T_VARCHAR, b"4"),
                    ("partitioner", T_VARCHAR,
                     b"org.apache.cassandra.dht.Murmur3Partitioner"),
                    ("rack", T_VARCHAR, b"rack1"),
                    ("release_version", T_VARCHAR, b"4.0.7"),
                    ("rpc_address", T_INET, b"\x7f\x00\x00\x01"),
                    ("rpc_port", T_INT, struct.pack(">i", 9042)),
                    ("schema_version", T_UUID, hashlib.md5(b"fake-schema").digest())]
            nrows = 1
        else:
            spec = [("peer", T_INET, None), ("data_center", T_VARCHAR, None),
                    ("host_id", T_UUID, None), ("preferred_ip", T_INET, None),
                    ("rack", T_VARCHAR, None), ("release_version", T_VARCHAR, None),
                    ("rpc_address", T_INET, None), ("schema_version", T_UUID, None)]
            if st.table == "peers_v2":
                spec += [("peer_port", T_INT, None), ("native_address", T_INET, None),
                         ("native_port", T_INT, None), ("preferred_port", T_INT, None)]
            nrows = 0
        byname = {n: (t, v) for n, t, v in spec}
        cols = st.cols if st.cols is not None else [n for n, _, _ in spec]
        for c in cols:
            if c not in byname:
                self._undefined(c, "system", st.table)
        rows = [[byname[c][1] for c in cols]] * nrows
        return rows_body("system", st.table, [(c, byname[c][0]) for c in cols], rows)

    def select_cols(self, st, values, prm):
        """system_schema.columns WHERE keyspace_name = ? AND table_name = ?"""
        spec = {"keyspace_name": T_VARCHAR, "table_name": T_VARCHAR,
                "column_name": T_VARCHAR, "clustering_order": T_VARCHAR,
                "column_name_bytes": T_BLOB, "kind": T_VARCHAR, "position": T_INT,
                "type": T_VARCHAR}
        order = ["keyspace_name", "table_name", "column_name", "clustering_order",
                 "column_name_bytes", "kind", "position", "type"]
        cols = st.cols if st.cols is not None else order
        for c in cols:
            if c not in spec:
                self._undefined(c, "system_schema", "columns")
        want = {}
        for col, term in ([st.where] + st.where_more) if st.where else []:
            if col not in ("keyspace_name", "table_name"):
                raise invalid("cql_fake_server supports only WHERE keyspace_name = ? "
                              "AND table_name = ? on system_schema.columns")
            v = self.term_value(term, values, T_VARCHAR, col)
            if v is None or v is UNSET:
                raise invalid("Invalid null value in condition for column %s" % col)
            want[col] = v.decode()
        rows = []
        for (ksn, tn), t in sorted(self.tables.items()):
            if want.get("keyspace_name", ksn) != ksn or want.get("table_name", tn) != tn:
                continue
            for c in sorted(t.types, key=lambda c: c.encode()):
                if c in t.part_cols:
                    kind, pos = "partition_key", t.pks.index(c)
                elif c in t.pks:
                    kind, pos = "clustering", t.pks.index(c) - t.npart
                elif c in t.statics:
                    kind, pos = "static", -1
                else:
                    kind, pos = "regular", -1
                cells = {"keyspace_name": ksn.encode(), "table_name": tn.encode(),
                         "column_name": c.encode(),
                         "clustering_order": b"asc" if kind == "clustering" else b"none",
                         "column_name_bytes": c.encode(), "kind": kind.encode(),
                         "position": struct.pack(">i", pos),
                         "type": TYPE_NAMES[t.types[c]].encode()}
                rows.append([cells[x] for x in cols])
        return rows_body("system_schema", "columns", [(c, spec[c]) for c in cols], rows)

    def blockfor(self, ksname, cl):
        ks = self.keyspaces.get(ksname)
        rep = ks["replication"] if ks else {}
        rfs = {k: int(v) for k, v in rep.items() if k != "class" and v.isdigit()}
        total = sum(rfs.values()) or 1
        local = rfs.get("replication_factor") or rfs.get(self.dcs[0] if self.dcs else
                                                         "datacenter1") or total
        if cl in (ONE, LOCAL_ONE, ANY):
            return 1
        if cl == TWO:
            return 2
        if cl == THREE:
            return 3
        if cl == ALL:
            return total
        if cl in (LOCAL_QUORUM, LOCAL_SERIAL):
            return quorum(local)
        return quorum(total)

    def execute(self, conn, st, values, prm, ks=None, stmt_id=None):
        """Run a statement (QUERY or EXECUTE); returns (body, flags,
        events). Raises CqlError / Drop."""
        kind = st.kind
        label = kind
        if kind == "select" and prm.consistency in (SERIAL, LOCAL_SERIAL):
            label = "select_serial"
        elif st.is_write and st.lwt:
            label = kind + "_lwt"
        self.count("statements", label)
        nmark = len(st.marker_cols)
        if prm.names is not None:
            byname = dict(zip(prm.names, prm.values))
            try:
                values = [byname[c] for c in st.marker_cols]
            except KeyError as e:
                raise invalid("Invalid unbound variable: %s" % e.args[0])
        elif len(values) != nmark:
            raise invalid("there were %d markers(?) in CQL but %d bound variables"
                          % (nmark, len(values)))
        if prm.page_size == 0:
            raise protocol("The page size cannot be 0")

        faulty = st.is_write or (st.is_read and self.args.read_faults)
        if faulty and stmt_id is not None and self.chance(self.args.unprepared):
            with self.lock:
                self.prepared.pop(stmt_id, None)
            self.count("faults", "unprepared")
            raise CqlError(E_UNPREPARED, UNPREPARED_MSG % stmt_id.hex(), short_bytes(stmt_id))

        with self.lock:
            if kind == "select_ks":
                return self.select_ks(st, values, prm), 0, []
            if kind == "select_cols":
                return self.select_cols(st, values, prm), 0, []
            if kind == "select_sys":
                return self.select_sys(st), 0, []
            if kind in ("create_ks", "create_table", "drop_ks", "drop_table", "use",
                        "alter_table"):
                return self.ddl(conn, st, ks)
            t = self.table(st, ks)
            if kind == "select":
                plan = self.plan_select(t, st, values, prm, stmt_id is not None)
            else:
                plan = self.plan_write(t, st, values, prm)
            if not faulty:
                return plan(), 0, []
            # faults, after validation (as in Cassandra)
            lwt = st.lwt
            serial_read = kind == "select" and prm.consistency in (SERIAL, LOCAL_SERIAL)
            if self.chance(self.args.unavailable):
                self.count("faults", "unavailable")
                cl = prm.consistency
                if lwt or serial_read:
                    src = prm.serial if lwt else prm.consistency
                    cl = LOCAL_QUORUM if src == LOCAL_SERIAL else QUORUM
                req = self.blockfor(t.ks, cl)
                raise CqlError(E_UNAVAILABLE, "Cannot achieve consistency level %s"
                               % CL_NAMES[cl], u16(cl) + i32(req) + i32(max(req - 1, 0)))
            if self.chance(self.args.timeout):
                self.count("faults", "timeout")
                if st.is_write:
                    if self.rand() < 0.5:
                        self.count("faults", "timeout_applied")
                        plan()
                        self.trace_fault("timeout (applied)")
                    if lwt:
                        cl = prm.serial
                        raise CqlError(E_WRITE_TIMEOUT, "CAS operation timed out - "
                                       "encountered contentions: 0",
                                       u16(cl) + i32(0) + i32(self.blockfor(t.ks, cl))
                                       + string("CAS"))
                    cl = prm.consistency
                    raise CqlError(E_WRITE_TIMEOUT, "Operation timed out - received only "
                                   "0 responses.", u16(cl) + i32(0)
                                   + i32(self.blockfor(t.ks, cl)) + string("SIMPLE"))
                cl = prm.consistency
                raise CqlError(E_READ_TIMEOUT, "Operation timed out - received only 0 "
                               "responses.", u16(cl) + i32(0)
                               + i32(self.blockfor(t.ks, cl)) + b"\x00")
            body = plan()
            if self.chance(self.args.drop):
                self.count("faults", "drop")
                self.trace_fault("drop (applied)")
                raise Drop()
            return body, 0, []

    def select_ks(self, st, values, prm):
        cols = st.cols if st.cols is not None else KS_ORDER
        for c in cols:
            if c not in KS_SCHEMA:
                self._undefined(c, "system_schema", "keyspaces")
        names = sorted(self.keyspaces)
        if st.where is not None:
            col, term = st.where
            if col != "keyspace_name":
                raise invalid("cql_fake_server supports only WHERE keyspace_name = ? "
                              "on system_schema.keyspaces")
            v = self.term_value(term, values, T_VARCHAR, col)
            if v is None or v is UNSET:
                raise invalid("Invalid null value in condition for column keyspace_name")
            names = [n for n in names if n.encode() == v]
        rows = []
        for n in names:
            ks = self.keyspaces[n]
            cells = {"keyspace_name": n.encode(),
                     "durable_writes": b"\x01" if ks["durable"] else b"\x00",
                     "replication": self.encode_map(ks["replication"])}
            rows.append([cells[c] for c in cols])
        if st.limit:
            rows = rows[:st.limit]
        return rows_body("system_schema", "keyspaces",
                         [(c, KS_SCHEMA[c]) for c in cols], rows)

    @staticmethod
    def encode_map(m):
        items = sorted((k.encode(), v.encode()) for k, v in m.items())
        return i32(len(items)) + b"".join(value(k) + value(v) for k, v in items)

    def plan_select(self, t, st, values, prm, is_execute):
        cols = st.cols if st.cols is not None else t.order
        specs = [(c, t.type(c)) for c in cols]
        serial = prm.consistency in (SERIAL, LOCAL_SERIAL)
        key = part = None
        if st.where is not None:
            named = [c for c, _ in [st.where] + st.where_more]
            if named[0] not in t.part_cols:
                raise invalid("Cannot execute this query as it might involve data "
                              "filtering and thus may have unpredictable performance. "
                              "If you want to execute this query despite the "
                              "performance unpredictability, use ALLOW FILTERING")
            if len(t.pks) > t.npart and sorted(named) == sorted(t.part_cols):
                # a whole partition
                terms = dict([st.where] + st.where_more)
                part = tuple(self.key_value(t, terms[c], values, c)
                             for c in t.part_cols)
            else:
                key = self.where_key(t, st, values)
        elif serial:
            raise invalid("SERIAL/LOCAL_SERIAL consistency may only be requested for "
                          "one partition at a time")
        skip = prm.skip_metadata
        ps = prm.paging_state
        if ps is not None and (len(ps) < len(PAGING_MAGIC) or
                               not ps.startswith(PAGING_MAGIC)):
            raise protocol("Invalid value for the paging state")

        def run():
            if part is not None:  # its rows in key order, or its static cells
                chosen = sorted(((k, r) for k, r in t.scan_items() if t.part(k) == part),
                                key=lambda kv: kv[0])
                rows = [[t.cell(k, r, c) for c in cols] for k, r in chosen]
                return rows_body(t.ks, t.name, specs, rows[:st.limit or None],
                                 skip=skip)
            if key is not None:
                r = t.rows.get(key)
                rows = [] if r is None else [[t.cell(key, r, c) for c in cols]]
                return rows_body(t.ks, t.name, specs, rows[:st.limit or None],
                                 skip=skip)
            items = sorted(t.scan_items(), key=lambda kv: hash_order(kv[0]))
            if ps is not None:
                after = hash_order(ps[len(PAGING_MAGIC):])
                items = [kv for kv in items if hash_order(kv[0]) > after]
            limit = st.limit
            page = prm.page_size if prm.page_size and prm.page_size > 0 else None
            n = min(x for x in (page, limit, len(items)) if x is not None)
            chosen = items[:n]
            state = None
            # a full page may be followed by more: a real range pager says so
            # and answers an empty page at the end
            if page is not None and n == page and (limit is None or limit > page):
                state = PAGING_MAGIC + chosen[-1][0] if chosen else None
            rows = [[t.cell(k, r, c) for c in cols] for k, r in chosen]
            return rows_body(t.ks, t.name, specs, rows, paging_state=state, skip=skip)
        return run

    def check_lwt_consistency(self, prm):
        if prm.consistency in (SERIAL, LOCAL_SERIAL):
            raise invalid("%s is not supported as conditional update commit consistency. "
                          "Use ANY if you mean \"make sure it is accepted but I don't care "
                          "how many replicas commit it for non-SERIAL reads\""
                          % CL_NAMES[prm.consistency])
        if prm.serial not in (SERIAL, LOCAL_SERIAL):
            raise invalid("Invalid consistency for conditional update. Must be one of "
                          "SERIAL or LOCAL_SERIAL")

    def plan_write(self, t, st, values, prm):
        if st.lwt:
            self.check_lwt_consistency(prm)
        elif prm.consistency in (SERIAL, LOCAL_SERIAL):
            raise invalid("You must use conditional updates for serializable writes")
        sets = []  # (col, bytes | None | UNSET)
        if st.kind == "insert":
            for c in st.cols:
                t.type(c)
            if len(set(st.cols)) != len(st.cols):
                raise invalid("Multiple definitions found for column %s"
                              % [c for c in st.cols if st.cols.count(c) > 1][0])
            missing = [c for c in t.pks if c not in st.cols]
            if missing:
                raise invalid("Some %s parts are missing: %s"
                              % ("partition key" if missing[0] in t.part_cols else
                                 "clustering key", ", ".join(missing)))
            parts = {}
            for c, term in zip(st.cols, st.terms):
                if c in t.pks:
                    parts[c] = self.key_value(t, term, values, c)
                else:
                    sets.append((c, self.term_value(term, values, t.types[c], c)))
            key = t.make_key([parts[c] for c in t.pks])
        else:
            key = self.where_key(t, st, values)
            if st.kind == "update":
                for c, term2 in st.sets:
                    t.type(c)
                    if c in t.pks:
                        raise invalid("PRIMARY KEY part %s found in SET part" % c)
                    sets.append((c, self.term_value(term2, values, t.types[c], c)))
            else:
                for c in st.cols:
                    t.type(c)
                    if c in t.pks:
                        raise invalid("Invalid identifier %s for deletion (should not "
                                      "be a PRIMARY KEY part)" % c)
        conds = []
        if isinstance(st.cond, list):
            for c, term in st.cond:
                t.type(c)
                if c in t.pks:
                    raise invalid("PRIMARY KEY column '%s' cannot have IF conditions" % c)
                v = self.term_value(term, values, t.types[c], c)
                if v is UNSET:
                    raise invalid("Invalid 'unset' value in condition")
                conds.append((c, v))

        ttl = 0
        if st.ttl is not None:
            tv = self.term_value(st.ttl, values, T_INT, "[ttl]")
            if tv is UNSET or tv is None:
                ttl = 0
            else:
                ttl = struct.unpack(">i", tv)[0]
            if ttl < 0:
                raise invalid("A TTL must be greater or equal to 0, but was %d" % ttl)
            if ttl > 630720000:
                raise invalid("ttl is too large. requested (%d) maximum (630720000)" % ttl)

        def apply():
            row = t.rows.get(key)
            now = time.time()
            # the write time of its cells: a Paxos ballot's (whole ms) for a
            # conditional write, else the client's default timestamp
            if st.lwt:
                wt = int(now * 1000) * 1000
            else:
                wt = prm.timestamp if prm.timestamp is not None else int(now * 1e6)
            if st.kind == "insert":
                row = t.rows.setdefault(key, {})
                row["_marker"] = True
                t.stamp(key, ["_marker"], ttl, now)
            if st.kind != "delete":
                t.stamp(key, [c for c, v in sets if v is not UNSET and v is not None
                              and c not in t.statics], ttl, now)
            elif st.kind == "update":
                if row is None:
                    row = t.rows.setdefault(key, {})
            elif not st.cols:  # DELETE of the row
                t.rows.pop(key, None)
                t.ttl.pop(key, None)
                t.wt.pop(key, None)
                return
            for c, v in (sets if st.kind != "delete" else [(c, None) for c in st.cols]):
                if v is UNSET:
                    continue
                if c in t.statics:  # the partition's cell
                    cells = t.srows.setdefault(t.part(key), {})
                    if v is None:
                        cells.pop(c, None)
                    else:
                        cells[c] = v
                    continue
                if v is None:
                    row.pop(c, None)
                    t.wt.get(key, {}).pop(c, None)
                else:
                    row[c] = v
                    t.wt.setdefault(key, {})[c] = wt
            if not row.get("_marker") and len(row) - ("_marker" in row) == 0:
                t.rows.pop(key, None)
                t.wt.pop(key, None)

        def run():
            if not st.lwt:
                apply()
                self.trace(t, st, key, True, sets, ttl)
                return VOID
            row = t.rows.get(key)
            exists = row is not None
            if st.cond == "not_exists":
                ok = not exists
            elif st.cond == "exists":
                ok = exists
            else:
                cur = row or {}
                ok = all(cur.get(c) == v for c, v in conds)
            specs = [("[applied]", T_BOOLEAN)]
            cells = [b"\x01" if ok else b"\x00"]
            self.trace(t, st, key, ok, sets, ttl)
            if ok:
                apply()
                self.count("lwt", "applied")
            else:
                self.count("lwt", "not_applied")
                if exists and st.cond == "not_exists":
                    for c in t.order:
                        specs.append((c, t.types[c]))
                        cells.append(t.cell(key, row, c))
                elif exists and isinstance(st.cond, list):
                    seen = []
                    for c, _ in st.cond:
                        if c not in seen:
                            seen.append(c)
                            specs.append((c, t.types[c]))
                            cells.append(row.get(c))
            return rows_body(t.ks, t.name, specs, [cells])
        return run

    def ddl(self, conn, st, cur_ks):
        """(body, flags, events) of a schema statement."""
        if st.kind == "use":
            if st.name not in self.keyspaces:
                raise invalid("Keyspace '%s' does not exist" % st.name)
            conn.keyspace = st.name
            return i32(3) + string(st.name), 0, []
        if st.kind == "create_ks":
            name = st.name
            if not re.fullmatch(r"\w{1,48}", name, re.A):
                raise invalid("Keyspace name must not be empty, more than 48 characters "
                              "long, or contain non-alphanumeric-underscore characters "
                              "(got \"%s\")" % name)
            rep = dict(st.replication)
            cls = rep.pop("class", None)
            if cls is None:
                raise CqlError(E_CONFIG, "Missing replication strategy class")
            short = cls.rsplit(".", 1)[-1]
            if short not in ("SimpleStrategy", "NetworkTopologyStrategy"):
                raise CqlError(E_CONFIG, "Unable to find replication strategy class '%s'"
                               % (cls if "." in cls else "org.apache.cassandra.locator." + cls))
            for k, v in rep.items():
                if not re.fullmatch(r"\d+", v):
                    raise CqlError(E_CONFIG, "Replication factor must be non-negative "
                                   "integer; found %s" % v)
            if short == "SimpleStrategy":
                if "replication_factor" not in rep:
                    raise CqlError(E_CONFIG, "SimpleStrategy requires a replication_factor "
                                   "strategy option.")
                extra = [k for k in rep if k != "replication_factor"]
                if extra:
                    raise CqlError(E_CONFIG, "Unrecognized strategy option {%s} passed to "
                                   "SimpleStrategy for keyspace %s" % (extra[0], name))
            elif self.dcs:
                bad = [k for k in rep if k not in self.dcs and k != "replication_factor"]
                if bad:
                    raise CqlError(E_CONFIG, "Unrecognized strategy option {%s} passed to "
                                   "NetworkTopologyStrategy for keyspace %s" % (bad[0], name))
            if name in self.keyspaces:
                if st.if_not_exists:
                    return VOID, 0, []
                raise CqlError(E_ALREADY_EXISTS, "Keyspace %s already exists" % name,
                               string(name) + string(""))
            stored = {"class": "org.apache.cassandra.locator." + short}
            stored.update({k: str(int(v)) for k, v in rep.items()})
            self.keyspaces[name] = {"replication": stored, "durable": True}
            warnings = []
            nodes = self.args.nodes
            for k, v in rep.items():
                if int(v) > nodes:
                    if k == "replication_factor":
                        warnings.append("Your replication factor %d for keyspace %s is "
                                        "higher than the number of nodes %d"
                                        % (int(v), name, nodes))
                    else:
                        warnings.append("Your replication factor %d for keyspace %s is "
                                        "higher than the number of nodes %d for "
                                        "datacenter %s" % (int(v), name, nodes, k))
            ev = schema_change("CREATED", "KEYSPACE", name)
            body = i32(5) + ev
            if warnings:
                return string_list(warnings) + body, 0x08, [ev]
            return body, 0, [ev]
        if st.kind == "create_table":
            ks = st.ks or cur_ks
            if ks is None:
                raise invalid("No keyspace has been specified. USE a keyspace, or "
                              "explicitly specify keyspace.tablename")
            if ks not in self.keyspaces:
                raise invalid("Keyspace '%s' doesn't exist" % ks)
            if not re.fullmatch(r"\w{1,48}", st.table, re.A):
                raise invalid("Table name must not be empty, more than 48 characters "
                              "long, or contain non-alphanumeric-underscore characters "
                              "(got \"%s\")" % st.table)
            if (ks, st.table) in self.tables:
                if st.if_not_exists:
                    return VOID, 0, []
                raise CqlError(E_ALREADY_EXISTS, "Cannot add already existing table \"%s\" "
                               "to keyspace \"%s\"" % (st.table, ks),
                               string(ks) + string(st.table))
            counters = [c for c, t in st.coldefs if t == TYPES["counter"]]
            for c in counters:
                if c in st.pk:
                    raise invalid("counter type is not supported for PRIMARY KEY "
                                  "column '%s'" % c)
            if counters and len(counters) + len(st.pk) != len(st.coldefs):
                raise invalid("Cannot mix counter and non counter columns in the "
                              "same table")
            self.tables[(ks, st.table)] = Table(ks, st.table, st.coldefs, st.pk,
                                              getattr(st, "statics", ()),
                                              getattr(st, "npart", 1))
            ev = schema_change("CREATED", "TABLE", ks, st.table)
            return i32(5) + ev, 0, [ev]
        if st.kind == "alter_table":
            ks = st.ks or cur_ks
            t = self.tables.get((ks, st.table)) if ks else None
            if t is None:
                raise invalid("Table '%s.%s' doesn't exist" % (ks, st.table))
            for c, _ in st.coldefs:
                if c in t.types:
                    raise invalid("Column with name '%s' already exists" % c)
            counter = TYPES["counter"]
            if any(typ == counter for typ in t.types.values()):
                for c, typ in st.coldefs:
                    if typ != counter:
                        # (a Config_error, as issue 37 reports of 4.0.7)
                        raise CqlError(E_CONFIG, "Cannot add a non counter column "
                                       "(%s) in a counter table" % c)
            for c, typ in st.coldefs:
                t.types[c] = typ
            t.reorder()
            ev = schema_change("UPDATED", "TABLE", ks, st.table)
            return i32(5) + ev, 0, [ev]
        if st.kind == "drop_table":
            ks = st.ks or cur_ks
            if ks is None or (ks, st.table) not in self.tables:
                if st.if_exists:
                    return VOID, 0, []
                raise invalid("Table '%s.%s' doesn't exist" % (ks, st.table))
            self.drop_tables([(ks, st.table)])
            ev = schema_change("DROPPED", "TABLE", ks, st.table)
            return i32(5) + ev, 0, [ev]
        if st.kind == "drop_ks":
            if st.name not in self.keyspaces:
                if st.if_exists:
                    return VOID, 0, []
                raise invalid("Keyspace '%s' doesn't exist" % st.name)
            self.drop_tables([k for k in self.tables if k[0] == st.name])
            del self.keyspaces[st.name]
            ev = schema_change("DROPPED", "KEYSPACE", st.name)
            return i32(5) + ev, 0, [ev]
        raise CqlError(E_SERVER, "unhandled statement kind %s" % st.kind)

    def drop_tables(self, keys):
        for key in keys:
            self.tables.pop(key, None)
            for pid, (pst, pks) in list(self.prepared.items()):
                if pst.is_write or pst.kind == "select":
                    if ((pst.ks or pks), pst.table) == key:
                        del self.prepared[pid]

    def prepare(self, conn, text):
        st = self.parse(text)
        with self.lock:
            ks, table, specs, pk, res = self.bind_info(st, conn.keyspace)
            pid = hashlib.md5(((conn.keyspace or "") + text).encode()).digest()
            self.prepared[pid] = (st, conn.keyspace)
        body = i32(4) + short_bytes(pid) + bind_metadata(ks, table, specs, pk)
        if res is None:
            body += NO_METADATA
        else:
            body += rows_metadata(ks, table, res)
        return body

    # -- network

    def serve(self):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", self.args.port))
        ls.listen(128)
        ls.settimeout(0.2)
        port = ls.getsockname()[1]
        if self.args.port_file:
            tmp = self.args.port_file + ".tmp%d" % os.getpid()
            with open(tmp, "w") as f:
                f.write("%d\n" % port)
            os.rename(tmp, self.args.port_file)
        else:
            sys.stdout.write("PORT %d\n" % port)
            sys.stdout.flush()
        self.log("listening on 127.0.0.1:%d (seed %d)" % (port, self.seed))
        while not self.stopping:
            try:
                s, addr = ls.accept()
            except socket.timeout:
                continue
            except OSError as e:
                if self.stopping:
                    break
                self.log("accept: %s" % e)
                time.sleep(0.05)
                continue
            s.settimeout(None)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.conns_lock:
                self.conn_ids += 1
                c = Conn(self, s, addr, self.conn_ids)
                self.conns.add(c)
            self.count_conn()
            c.start()
        ls.close()

    def count_conn_error(self):
        with self.stats_lock:
            self.stats["connection_errors"] += 1

    def count_conn(self):
        with self.stats_lock:
            self.stats["connections"] += 1

    def write_stats(self):
        if not self.args.stats_file:
            return
        with self.stats_lock:
            data = json.dumps(self.stats, indent=1, sort_keys=True)
        tmp = self.args.stats_file + ".tmp%d" % os.getpid()
        with open(tmp, "w") as f:
            f.write(data + "\n")
        os.rename(tmp, self.args.stats_file)


class Conn(threading.Thread):
    def __init__(self, server, sock, addr, cid):
        super().__init__(daemon=True)
        self.srv, self.sock, self.cid = server, sock, cid
        self.peer = "%s:%d" % addr[:2]
        self.wlock = threading.Lock()
        self.state = "new"          # new -> auth -> ready
        self.keyspace = None
        self.events = set()
        self.closed = False

    def send(self, data):
        with self.wlock:
            if self.closed:
                return
            try:
                self.sock.sendall(data)
            except OSError:
                self.kill()

    def kill(self):
        if not self.closed:
            self.closed = True
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                self.sock.close()
            except OSError:
                pass

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def tls_handshake(self):
        """Wrap the socket in TLS; False (logged, counted) when that fails."""
        try:
            self.sock.settimeout(10)
            self.sock = self.srv.tls_ctx.wrap_socket(self.sock, server_side=True)
            self.sock.settimeout(None)
        except (ssl.SSLError, OSError) as e:
            with self.srv.stats_lock:
                self.srv.stats["tls"]["failures"] += 1
            self.srv.log("conn %d (%s): TLS handshake failed: %s" % (self.cid, self.peer, e))
            return False
        with self.srv.stats_lock:
            self.srv.stats["tls"]["handshakes"] += 1
        return True

    def run(self):
        try:
            if self.srv.tls_ctx is None or self.tls_handshake():
                self.loop()
        except Exception as e:  # never let one connection take the server down
            self.srv.count_conn_error()
            self.srv.log("conn %d (%s): internal error: %r" % (self.cid, self.peer, e))
        finally:
            self.kill()
            with self.srv.conns_lock:
                self.srv.conns.discard(self)

    def fatal(self, stream, msg, version=RESP_VERSION, hdr_len=9):
        """A protocol error that ends the connection."""
        body = i32(E_PROTOCOL) + string(msg)
        if hdr_len == 8:  # v1 / v2 headers: one-byte stream
            data = struct.pack(">BBbBI", version, 0, stream, OP_ERROR, len(body)) + body
        else:
            data = frame(stream, OP_ERROR, body, version=version)
        self.srv.count("errors", "0x%04x" % E_PROTOCOL)
        self.send(data)
        self.srv.count_conn_error()
        self.srv.log("conn %d (%s): protocol error: %s" % (self.cid, self.peer, msg))
        self.kill()

    def loop(self):
        while not self.closed:
            first = self.recv_exact(1)
            if first is None:
                return
            v = first[0]
            ver = v & 0x7F
            if ver != VERSION:
                # answer in the client's own framing for old versions, else in ours
                rest = self.recv_exact(7 if ver in (1, 2) else 8) or b""
                if ver in (1, 2):
                    stream = struct.unpack_from(">b", rest, 1)[0] if len(rest) >= 2 else 0
                    self.fatal(stream, "Invalid or unsupported protocol version (%d); "
                               "supported versions are (4/v4)" % ver, 0x80 | ver, 8)
                else:
                    stream = struct.unpack_from(">h", rest, 1)[0] if len(rest) >= 3 else 0
                    self.fatal(stream, "Invalid or unsupported protocol version (%d); "
                               "supported versions are (4/v4)" % ver,
                               0x80 | ver if ver == 3 else RESP_VERSION)
                return
            rest = self.recv_exact(8)
            if rest is None:
                return
            flags, stream, opcode, length = struct.unpack(">BhBI", rest)
            if v & 0x80:
                self.fatal(stream, "Wrong protocol direction (expected REQUEST, got "
                           "RESPONSE)")
                return
            if length > MAX_BODY:
                self.fatal(stream, "Request is too big: length %d exceeds maximum "
                           "allowed length %d." % (length, MAX_BODY))
                return
            body = self.recv_exact(length) if length else b""
            if body is None:
                self.srv.log("conn %d (%s): connection closed inside a frame"
                             % (self.cid, self.peer))
                self.srv.count_conn_error()
                return
            if opcode not in REQUEST_OPS:
                self.fatal(stream, "Unknown opcode %d" % opcode if opcode not in OPNAMES
                           else "Unexpected message %s" % OPNAMES[opcode])
                return
            if flags & 0x01:
                self.fatal(stream, "Received a compressed frame but no compression "
                           "was negotiated")
                return
            self.srv.count("requests", OPNAMES[opcode])
            if self.srv.args.verbose:
                self.srv.log("conn %d: stream %d %s (%d bytes)"
                             % (self.cid, stream, OPNAMES[opcode], length))
            if self.srv.args.reorder:
                threading.Thread(target=self.handle, daemon=True,
                                 args=(stream, opcode, flags, body, True)).start()
            else:
                self.handle(stream, opcode, flags, body, False)

    def handle(self, stream, opcode, flags, body, jitter):
        srv = self.srv
        if jitter:
            time.sleep(srv.rand() * 0.003)
        events = []
        try:
            out_body, out_op, out_flags, events = self.dispatch(opcode, flags, body)
            resp = frame(stream, out_op, out_body, out_flags)
        except Drop:
            srv.log("conn %d (%s): dropped after applying a write (fault)"
                    % (self.cid, self.peer))
            self.kill()
            return
        except CqlError as e:
            srv.count("errors", "0x%04x" % e.code)
            if e.close:
                self.fatal(stream, e.msg)
                return
            resp = frame(stream, OP_ERROR, e.body())
        except Exception as e:
            srv.count("errors", "0x%04x" % E_SERVER)
            srv.log("conn %d (%s): server error: %r" % (self.cid, self.peer, e))
            resp = frame(stream, OP_ERROR, i32(E_SERVER) + string("cql_fake_server: %r" % e))
        if srv.args.delay_ms > 0:
            srv.count("faults", "delayed")
            time.sleep(srv.rand() * srv.args.delay_ms / 1000.0)
        self.send(resp)
        srv.broadcast_events(events)

    def dispatch(self, opcode, flags, body):
        """(body, opcode, flags, events) of the answer."""
        srv = self.srv
        r = Reader(body, OPNAMES[opcode])
        if flags & 0x04:  # custom payload: [bytes map]
            for _ in range(r.u16("custom payload")):
                r.string("custom payload key")
                r.bytes_("custom payload value")
        if opcode == OP_OPTIONS:
            r.end()
            return string_multimap([("PROTOCOL_VERSIONS", ["4/v4"]),
                                    ("COMPRESSION", []),
                                    ("CQL_VERSION", ["3.4.5"])]), OP_SUPPORTED, 0, []
        if opcode == OP_STARTUP:
            opts = r.string_map("startup options")
            r.end()
            if self.state != "new":
                raise protocol("Unexpected message STARTUP, the connection is already "
                               "initialized")
            if "CQL_VERSION" not in opts:
                raise protocol("Missing value CQL_VERSION in STARTUP message")
            if not re.fullmatch(r"3(\.\d+){0,2}", opts["CQL_VERSION"]):
                raise protocol("Invalid or unsupported CQL version: %s"
                               % opts["CQL_VERSION"])
            if opts.get("COMPRESSION"):
                raise protocol("Unknown compression algorithm: %s" % opts["COMPRESSION"])
            if srv.args.auth:
                self.state = "auth"
                return (string("org.apache.cassandra.auth.PasswordAuthenticator"),
                        OP_AUTHENTICATE, 0, [])
            self.state = "ready"
            return b"", OP_READY, 0, []
        if opcode == OP_AUTH_RESPONSE:
            token = r.bytes_("token")
            r.end()
            if self.state != "auth":
                raise protocol("Unexpected message AUTH_RESPONSE, expecting %s"
                               % ("STARTUP or OPTIONS" if self.state == "new"
                                  else "no authentication"))
            if token is None:
                raise CqlError(E_BAD_CREDENTIALS, "Authentication ID must not be null")
            parts = token.split(b"\x00")
            if len(parts) < 3:
                raise CqlError(E_BAD_CREDENTIALS, "Password must not be null")
            user, pw = parts[-2].decode("utf-8", "replace"), parts[-1].decode("utf-8", "replace")
            want_user, _, want_pw = srv.args.auth.partition(":")
            if user != want_user or pw != want_pw:
                raise CqlError(E_BAD_CREDENTIALS, "Provided username %s and/or password "
                               "are incorrect" % user)
            self.state = "ready"
            return value(None), OP_AUTH_SUCCESS, 0, []
        if self.state == "new":
            raise protocol("Unexpected message %s, expecting STARTUP or OPTIONS"
                           % OPNAMES[opcode])
        if self.state == "auth":
            raise protocol("Unexpected message %s, expecting SASL_RESPONSE"
                           % OPNAMES[opcode])
        if opcode == OP_REGISTER:
            evs = r.string_list("event types")
            r.end()
            for e in evs:
                if e not in ("TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"):
                    raise protocol("Invalid value '%s' for Type" % e)
            self.events.update(evs)
            return b"", OP_READY, 0, []
        if opcode == OP_PREPARE:
            text = r.long_string("query")
            r.end()
            return srv.prepare(self, text), OP_RESULT, 0, []
        if opcode == OP_QUERY:
            text = r.long_string("query")
            prm = Params(r)
            r.end()
            st = srv.parse(text)
            body, fl, ev = srv.execute(self, st, prm.values, prm, ks=self.keyspace)
            return body, OP_RESULT, fl, ev
        if opcode == OP_EXECUTE:
            pid = r.short_bytes("statement id")
            prm = Params(r)
            r.end()
            with srv.lock:
                entry = srv.prepared.get(pid)
            if entry is None:
                raise CqlError(E_UNPREPARED, UNPREPARED_MSG % pid.hex(), short_bytes(pid))
            st, pks = entry
            # a statement runs in the keyspace it was prepared in
            body, fl, ev = srv.execute(self, st, prm.values, prm, ks=pks, stmt_id=pid)
            return body, OP_RESULT, fl, ev
        if opcode == OP_BATCH:
            raise invalid("cql_fake_server does not implement BATCH")
        raise protocol("Unexpected message %s" % OPNAMES[opcode], True)


def probability(s):
    p = float(s)
    if not 0.0 <= p <= 1.0:
        raise argparse.ArgumentTypeError("%s is not a probability in [0, 1]" % s)
    return p


_STOP = []  # a signal that came before the server existed


def main(argv=None):
    srv = None

    def stop(signum, _frame):
        _STOP.append(signum)
        if srv is not None:
            srv.stopping = True

    # first thing: a background job starts with SIGINT ignored, and a signal
    # sent while we start up must still stop us
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ap = argparse.ArgumentParser(description="A stand-in Cassandra 4.0.7 for the CQL "
                                 "native protocol v4 (see the module docstring).")
    ap.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: a free one)")
    ap.add_argument("--port-file", help="write the port here (else print PORT <n>)")
    ap.add_argument("--auth", metavar="USER:PASS", help="require PasswordAuthenticator")
    ap.add_argument("--seed", type=int, help="PRNG seed for faults and delays")
    ap.add_argument("--drop", type=probability, default=0.0)
    ap.add_argument("--timeout", type=probability, default=0.0)
    ap.add_argument("--unavailable", type=probability, default=0.0)
    ap.add_argument("--unprepared", type=probability, default=0.0)
    ap.add_argument("--read-faults", action="store_true",
                    help="inject the faults into SELECTs too")
    ap.add_argument("--delay-ms", type=int, default=0)
    ap.add_argument("--reorder", action="store_true",
                    help="answer pipelined requests out of order")
    ap.add_argument("--nodes", type=int, default=3,
                    help="nodes per datacenter, for the RF warning (default 3)")
    ap.add_argument("--dcs", help="datacenter names NetworkTopologyStrategy accepts "
                    "(default: any)")
    ap.add_argument("--stats-file", help="JSON counts written at exit")
    ap.add_argument("--tls-cert", help="serve TLS with this certificate (PEM)")
    ap.add_argument("--tls-key", help="the private key of --tls-cert (PEM)")
    ap.add_argument("--tls-client-ca", help="demand a client certificate signed by this CA")
    ap.add_argument("--tls12", action="store_true", help="TLS 1.2 at most (default: 1.3)")
    ap.add_argument("--trace", metavar="FILE",
                    help="append one line per write (key, statement, applied, cells)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key) or (args.tls_client_ca and not args.tls_cert):
        ap.error("--tls-cert and --tls-key go together (and --tls-client-ca needs them)")
    if args.tls_cert and args.reorder:
        ap.error("--reorder is not available with TLS")
    srv = Server(args)
    srv.stopping = bool(_STOP)
    try:
        srv.serve()
    finally:
        srv.write_stats()
    return 0


if __name__ == "__main__":
    sys.exit(main())
