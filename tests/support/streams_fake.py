#!/usr/bin/env python3
"""streams_fake.py - a stand-in for DynamoDB and DynamoDB Streams that
serves one table whose stream has split: shard sh-1 (closed, the parent:
changes k1 at 100 and k2 at 200) and shard sh-2 (open, its child: a change
whose key does not fit the table at 250, then k3 at 300), the child listed
first and on a page of its own (DescribeStream pagination). DynamoDB Local
never splits a shard, so tests/test_streams.c reads the split here.

    streams_fake.py PROGRAM [ARG...]

Runs PROGRAM with UNICO_TEST_STREAMS_PORT set to the stand-in's port and
dummy AWS credentials; exits with its code.
"""
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARN = "arn:aws:dynamodb:ddblocal:000000000000:table/users/stream/x"
SHARDS = {
    "sh-1": {"parent": None, "closed": True,
             "records": [(100, {"id": {"S": "k1"}}), (200, {"id": {"S": "k2"}})]},
    "sh-2": {"parent": "sh-1", "closed": False,
             "records": [(250, {"id": {"N": "5"}}), (300, {"id": {"S": "k3"}})]},
}


def shard_json(sid):
    s = {"ShardId": sid, "SequenceNumberRange": {"StartingSequenceNumber": "1"}}
    if SHARDS[sid]["parent"]:
        s["ParentShardId"] = SHARDS[sid]["parent"]
    return s


def describe_stream(req):
    if req.get("ExclusiveStartShardId") == "sh-2":
        return {"StreamDescription": {"StreamArn": ARN, "Shards": [shard_json("sh-1")]}}
    return {"StreamDescription": {"StreamArn": ARN, "Shards": [shard_json("sh-2")],
                                  "LastEvaluatedShardId": "sh-2"}}


def get_records(req):
    _, sid, after = req["ShardIterator"].split("|")
    sh = SHARDS[sid]
    recs = [r for r in sh["records"] if r[0] > int(after)]
    out = {"Records": [{"eventName": "INSERT", "dynamodb": {
        "Keys": k, "SequenceNumber": "%021d" % seq}} for seq, k in recs]}
    last = recs[-1][0] if recs else int(after)
    if not sh["closed"]:
        out["NextShardIterator"] = "it|%s|%d" % (sid, last)
    return out


def answer(target, req):
    op = target.split(".")[-1]
    if op == "DescribeTable":
        return {"Table": {"TableName": req["TableName"], "LatestStreamArn": ARN,
                          "StreamSpecification": {"StreamEnabled": True,
                                                  "StreamViewType": "KEYS_ONLY"}}}
    if op == "DescribeStream":
        return describe_stream(req)
    if op == "GetShardIterator":
        after = int(req.get("SequenceNumber", "0")) \
            if req["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER" else 0
        return {"ShardIterator": "it|%s|%d" % (req["ShardId"], after)}
    if op == "GetRecords":
        return get_records(req)
    return None


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        target = self.headers.get("X-Amz-Target", "")
        out = answer(target, json.loads(body or b"{}"))
        code = 200 if out is not None else 400
        if out is None:
            out = {"__type": "UnknownOperationException", "message": target}
        data = json.dumps(out).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    env = dict(os.environ, UNICO_TEST_STREAMS_PORT=str(srv.server_address[1]),
               AWS_ACCESS_KEY_ID="fake", AWS_SECRET_ACCESS_KEY="fake",
               AWS_REGION="us-east-1")
    rc = subprocess.call(sys.argv[1:], env=env)
    srv.shutdown()
    return rc


if __name__ == "__main__":
    sys.exit(main())
