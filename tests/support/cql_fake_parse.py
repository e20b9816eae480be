"""cql_fake_parse.py - the subset of CQL the stand-in server
(cql_fake_server.py) understands: its tokenizer and parser, which turn a
statement into a Stmt."""

import re

from cql_fake_proto import E_SYNTAX, E_CONFIG, TYPES, CqlError, invalid


# ---------------------------------------------------------------------------
# CQL: tokenizer and parser of the subset

TOKEN_RE = re.compile(r"""
    (?P<ws>\s+|--[^\n]*|//[^\n]*|/\*.*?\*/)
  | (?P<qid>"(?:[^"]|"")*")
  | (?P<str>'(?:[^']|'')*')
  | (?P<blob>0[xX][0-9a-fA-F]*)
  | (?P<num>-?\d+(?:\.\d+)?)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<mark>\?)
  | (?P<p>[(),=.;{}:*<>\[\]])
""", re.X | re.S)


class Tok:
    __slots__ = ("kind", "val", "raw", "pos")

    def __init__(self, kind, val, raw, pos):
        self.kind, self.val, self.raw, self.pos = kind, val, raw, pos


def tokenize(q):
    toks, pos = [], 0
    while pos < len(q):
        m = TOKEN_RE.match(q, pos)
        if not m:
            raise CqlError(E_SYNTAX, "line 1:%d token recognition error at: '%s'"
                           % (pos, q[pos]))
        kind, raw = m.lastgroup, m.group()
        if kind == "qid":
            toks.append(Tok("id", raw[1:-1].replace('""', '"'), raw, pos))
            toks[-1].kind = "qid"
        elif kind == "id":
            toks.append(Tok("id", raw.lower(), raw, pos))
        elif kind == "str":
            toks.append(Tok("str", raw[1:-1].replace("''", "'"), raw, pos))
        elif kind == "blob":
            h = raw[2:]
            if len(h) % 2:
                raise CqlError(E_SYNTAX, "line 1:%d odd blob literal %s" % (pos, raw))
            toks.append(Tok("blob", bytes.fromhex(h), raw, pos))
        elif kind == "num":
            toks.append(Tok("num", raw, raw, pos))
        elif kind != "ws":
            toks.append(Tok(kind, raw, raw, pos))
        pos = m.end()
    return toks


class Stmt:
    """A parsed statement. Terms are ("m", index) for a bind marker or
    ("lit", kind, text) for a literal."""

    def __init__(self, kind, text):
        self.kind, self.text = kind, text
        self.ks = self.table = None
        self.markers = []       # [(column name, type option)] in text order
        self.cols = []          # SELECT columns, INSERT columns, DELETE columns
        self.terms = []         # INSERT values
        self.sets = []          # UPDATE [(col, term)]
        self.where = None       # (col, term): the first WHERE condition
        self.where_more = []    # [(col, term)]: the ones after AND
        self.cond = None        # None | "not_exists" | "exists" | [(col, term)]
        self.ttl = None         # USING TTL term
        self.limit = None
        self.if_not_exists = self.if_exists = False
        self.replication = None
        self.coldefs = None
        self.pk = None
        self.name = None

    @property
    def lwt(self):
        return self.cond is not None

    @property
    def is_write(self):
        return self.kind in ("insert", "update", "delete")

    @property
    def is_read(self):
        return self.kind in ("select", "select_ks", "select_cols", "select_sys")


class Parser:
    def __init__(self, text):
        self.text = text
        self.t = tokenize(text)
        self.i = 0
        self.nmarkers = 0
        self.marker_cols = []   # column per marker, filled while parsing

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def fail(self, what=None):
        tok = self.peek()
        if tok is None:
            raise CqlError(E_SYNTAX, "line 1:%d mismatched input '<EOF>' expecting %s "
                           "(%s)" % (len(self.text), what or "more", self.text[:80]))
        raise CqlError(E_SYNTAX, "line 1:%d no viable alternative at input '%s' "
                       "([%s]...)%s" % (tok.pos, tok.raw, tok.raw,
                                        "" if what is None else " expecting " + what))

    def is_kw(self, kw, k=0):
        tok = self.peek(k)
        return tok is not None and tok.kind == "id" and tok.val == kw

    def accept_kw(self, *kws):
        for k, kw in enumerate(kws):
            if not self.is_kw(kw, k):
                return False
        self.i += len(kws)
        return True

    def kw(self, *kws):
        for kw in kws:
            if not self.accept_kw(kw):
                self.fail(kw.upper())

    def accept_p(self, p):
        tok = self.peek()
        if tok is not None and tok.kind == "p" and tok.val == p:
            self.i += 1
            return True
        return False

    def p(self, p):
        if not self.accept_p(p):
            self.fail("'%s'" % p)

    def ident(self):
        tok = self.peek()
        if tok is None or tok.kind not in ("id", "qid"):
            self.fail("an identifier")
        self.i += 1
        return tok.val

    def tname(self):
        a = self.ident()
        if self.accept_p("."):
            return a, self.ident()
        return None, a

    def term(self, col):
        tok = self.peek()
        if tok is None:
            self.fail("a term")
        self.i += 1
        if tok.kind == "mark":
            self.marker_cols.append(col)
            self.nmarkers += 1
            return ("m", self.nmarkers - 1)
        if tok.kind == "num":
            return ("lit", "num", tok.val)
        if tok.kind == "str":
            return ("lit", "str", tok.val)
        if tok.kind == "blob":
            return ("lit", "blob", tok.val)
        if tok.kind == "id" and tok.val in ("true", "false"):
            return ("lit", "bool", tok.val)
        if tok.kind == "id" and tok.val == "null":
            return ("lit", "null", None)
        self.i -= 1
        self.fail("a term")

    def end(self):
        self.accept_p(";")
        if self.peek() is not None:
            self.fail("<EOF>")

    # statements

    def parse(self):
        text = self.text
        if self.accept_kw("select"):
            st = self.select(text)
        elif self.accept_kw("insert"):
            st = self.insert(text)
        elif self.accept_kw("update"):
            st = self.update(text)
        elif self.accept_kw("delete"):
            st = self.delete(text)
        elif self.accept_kw("create"):
            st = self.create(text)
        elif self.accept_kw("drop"):
            st = self.drop(text)
        elif self.accept_kw("alter"):
            st = self.alter(text)
        elif self.accept_kw("use"):
            st = Stmt("use", text)
            st.name = self.ident()
        else:
            tok = self.peek()
            if tok is None:
                raise CqlError(E_SYNTAX, "line 0:-1 no viable alternative at input '<EOF>'")
            if tok.kind == "id" and tok.val in ("batch", "begin", "truncate",
                                                "grant", "revoke", "list", "apply"):
                raise CqlError(E_SYNTAX, "cql_fake_server does not implement this "
                               "statement: %s" % text[:200])
            self.fail()
        self.end()
        st.marker_cols = self.marker_cols
        return st

    def select(self, text):
        st = Stmt("select", text)
        if self.accept_p("*"):
            st.cols = None
        else:
            while True:
                name = self.ident()
                if self.accept_p("("):
                    if name not in ("ttl", "writetime"):
                        raise CqlError(E_SYNTAX, "cql_fake_server does not implement "
                                       "functions in selections but TTL() and "
                                       "WRITETIME(): %s" % text[:200])
                    # (Cassandra's column names: ttl(c), writetime(c))
                    name = "%s(%s)" % (name, self.ident())
                    self.p(")")
                st.cols.append(name)
                if not self.accept_p(","):
                    break
        self.kw("from")
        st.ks, st.table = self.tname()
        if st.ks == "system_schema" and st.table == "keyspaces":
            st.kind = "select_ks"
        if st.ks == "system_schema" and st.table == "columns":
            st.kind = "select_cols"
        if st.ks == "system" and st.table in ("local", "peers", "peers_v2"):
            st.kind = "select_sys"
        if self.accept_kw("where"):
            self.where_clause(st)
        if self.accept_kw("limit"):
            tok = self.peek()
            if tok is None or tok.kind != "num" or not tok.val.isdigit():
                self.fail("an integer")
            self.i += 1
            st.limit = int(tok.val)
            if st.limit <= 0:
                raise invalid("LIMIT must be strictly positive")
        self.accept_kw("allow", "filtering")
        return st

    def where_clause(self, st):
        col = self.ident()
        self.p("=")
        st.where = (col, self.term(col))
        while self.accept_kw("and"):
            col = self.ident()
            self.p("=")
            st.where_more.append((col, self.term(col)))

    def conditions(self, st):
        if not self.accept_kw("if"):
            return
        if self.accept_kw("exists"):
            st.cond = "exists"
            return
        st.cond = []
        while True:
            col = self.ident()
            self.p("=")
            st.cond.append((col, self.term(col)))
            if not self.accept_kw("and"):
                break

    def using(self, text, st):
        if not self.accept_kw("using"):
            return
        if not self.accept_kw("ttl"):
            raise invalid("cql_fake_server does not implement USING "
                          "TIMESTAMP: %s" % text[:200])
        st.ttl = self.term("[ttl]")
        if self.is_kw("and"):
            raise invalid("cql_fake_server does not implement USING "
                          "TIMESTAMP: %s" % text[:200])

    def insert(self, text):
        st = Stmt("insert", text)
        self.kw("into")
        st.ks, st.table = self.tname()
        self.p("(")
        while True:
            st.cols.append(self.ident())
            if not self.accept_p(","):
                break
        self.p(")")
        self.kw("values")
        self.p("(")
        while True:
            col = st.cols[len(st.terms)] if len(st.terms) < len(st.cols) else None
            st.terms.append(self.term(col))
            if not self.accept_p(","):
                break
        self.p(")")
        if len(st.terms) != len(st.cols):
            raise invalid("Unmatched column names/values")
        if self.accept_kw("if"):
            self.kw("not", "exists")
            st.cond = "not_exists"
        self.using(text, st)
        return st

    def update(self, text):
        st = Stmt("update", text)
        st.ks, st.table = self.tname()
        self.using(text, st)
        self.kw("set")
        while True:
            col = self.ident()
            self.p("=")
            st.sets.append((col, self.term(col)))
            if not self.accept_p(","):
                break
        self.kw("where")
        self.where_clause(st)
        self.conditions(st)
        return st

    def delete(self, text):
        st = Stmt("delete", text)
        while not self.is_kw("from"):
            st.cols.append(self.ident())
            if not self.accept_p(","):
                break
        self.kw("from")
        st.ks, st.table = self.tname()
        if self.is_kw("using"):  # (DELETE takes only USING TIMESTAMP)
            raise invalid("cql_fake_server does not implement USING "
                          "TIMESTAMP: %s" % text[:200])
        self.kw("where")
        self.where_clause(st)
        self.conditions(st)
        return st

    def create(self, text):
        if self.accept_kw("keyspace"):
            st = Stmt("create_ks", text)
            st.if_not_exists = self.accept_kw("if", "not", "exists")
            st.name = self.ident()
            self.kw("with")
            props = {}
            while True:
                prop = self.ident()
                self.p("=")
                if self.accept_p("{"):
                    m = {}
                    if not self.accept_p("}"):
                        while True:
                            k = self.peek()
                            if k is None or k.kind != "str":
                                self.fail("a string")
                            self.i += 1
                            self.p(":")
                            v = self.peek()
                            if v is None or v.kind not in ("str", "num"):
                                self.fail("a string or a number")
                            self.i += 1
                            m[k.val] = v.val
                            if not self.accept_p(","):
                                break
                        self.p("}")
                    props[prop] = m
                else:
                    tok = self.peek()
                    if tok is None:
                        self.fail("a value")
                    self.i += 1
                    props[prop] = tok.val
                if not self.accept_kw("and"):
                    break
            if "replication" not in props or not isinstance(props["replication"], dict):
                raise CqlError(E_CONFIG, "Missing mandatory option 'replication'")
            st.replication = props["replication"]
            return st
        if self.accept_kw("table") or self.accept_kw("columnfamily"):
            st = Stmt("create_table", text)
            st.if_not_exists = self.accept_kw("if", "not", "exists")
            st.ks, st.table = self.tname()
            self.p("(")
            st.coldefs, pks, statics, npart = [], [], [], 1
            while True:
                if self.accept_kw("primary", "key"):
                    if pks:
                        raise invalid("Multiple PRIMARY KEYs specifed (exactly one "
                                      "required)")
                    self.p("(")
                    if self.accept_p("("):  # ((partition...), clustering...)
                        pks.append(self.ident())
                        while self.accept_p(","):
                            pks.append(self.ident())
                        npart = len(pks)
                        self.p(")")
                    else:
                        pks.append(self.ident())
                    while self.accept_p(","):
                        pks.append(self.ident())
                    self.p(")")
                else:
                    name = self.ident()
                    tok = self.peek()
                    if tok is None or tok.kind != "id":
                        self.fail("a type")
                    self.i += 1
                    if tok.val not in TYPES:
                        raise invalid("cql_fake_server does not implement type %s"
                                      % tok.raw)
                    st.coldefs.append((name, TYPES[tok.val]))
                    if self.accept_kw("primary", "key"):
                        pks.append(name)
                    if self.accept_kw("static"):
                        statics.append(name)
                if not self.accept_p(","):
                    break
            self.p(")")
            if self.accept_kw("with"):  # table options: accepted, ignored
                while self.peek() is not None and not (self.peek().kind == "p" and
                                                       self.peek().val == ";"):
                    self.i += 1
            if not pks:
                raise invalid("No PRIMARY KEY specifed for table '%s' (exactly one "
                              "required)" % st.table)
            names = [c for c, _ in st.coldefs]
            if len(set(names)) != len(names):
                raise invalid("Duplicate column names")
            for k in pks:
                if k not in names:
                    raise invalid("Unknown definition %s referenced in PRIMARY KEY" % k)
            for c in statics:
                if c in pks:
                    raise invalid("Static column %s cannot be part of the PRIMARY "
                                  "KEY" % c)
            if statics and len(pks) <= npart:
                raise invalid("Static columns are only useful (and thus "
                              "allowed) if the table has at least one "
                              "clustering column")
            st.pk = pks
            st.statics = statics
            st.npart = npart
            return st
        self.fail("KEYSPACE or TABLE")

    def alter(self, text):
        self.kw("table")
        st = Stmt("alter_table", text)
        st.ks, st.table = self.tname()
        self.kw("add")
        st.coldefs = []
        paren = self.accept_p("(")
        while True:
            name = self.ident()
            tok = self.peek()
            if tok is None or tok.kind != "id":
                self.fail("a type")
            self.i += 1
            if tok.val not in TYPES:
                raise invalid("cql_fake_server does not implement type %s" % tok.raw)
            st.coldefs.append((name, TYPES[tok.val]))
            if not paren or not self.accept_p(","):
                break
        if paren:
            self.p(")")
        return st

    def drop(self, text):
        if self.accept_kw("keyspace"):
            st = Stmt("drop_ks", text)
            st.if_exists = self.accept_kw("if", "exists")
            st.name = self.ident()
            return st
        if self.accept_kw("table"):
            st = Stmt("drop_table", text)
            st.if_exists = self.accept_kw("if", "exists")
            st.ks, st.table = self.tname()
            return st
        self.fail("KEYSPACE or TABLE")
