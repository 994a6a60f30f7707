#!/usr/bin/env python3
"""The replication tests' independent S3 client and signer (botocore/boto3 from PyPI), never the code under test.

  s3check.py sign                         reads a request as JSON on stdin, prints botocore's SigV4 headers as JSON
  s3check.py create-bucket BUCKET         creates a bucket (no error when it exists)
  s3check.py download BUCKET PREFIX DEST  writes every object under PREFIX to DEST/<key>, prints [{key, size, etag}]
  s3check.py flip BUCKET KEY OFFSET       flips the low bit of one byte of an object (read, change, write back)
  s3check.py list BUCKET PREFIX           prints the keys under PREFIX (relative to it) as JSON
  s3check.py get BUCKET KEY FILE          writes an object's bytes to FILE
  s3check.py put BUCKET KEY FILE          stores FILE's bytes as an object
  s3check.py delete BUCKET KEY            removes an object

The store's endpoint and credentials come from SQLCIPHERKIT_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY.
"""
import datetime
import json
import os
import sys

import botocore.auth
import botocore.credentials
from botocore.awsrequest import AWSRequest
from botocore.config import Config


def client():
    import boto3
    return boto3.client(
        "s3", endpoint_url=os.environ["SQLCIPHERKIT_S3_ENDPOINT"], region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 2}))


def sign():
    spec = json.load(sys.stdin)
    when = datetime.datetime.strptime(spec["timestamp"], "%Y%m%dT%H%M%SZ")
    # botocore reads the time from this function; the test gives the same time to both signers.
    botocore.auth.get_current_datetime = lambda: when
    credentials = botocore.credentials.Credentials(spec["access_key"], spec["secret_key"], spec.get("token"))
    request = AWSRequest(method=spec["method"], url=spec["url"], data=bytes.fromhex(spec["body_hex"]),
                         headers=spec["headers"], params=dict(spec["params"]))
    if spec.get("unsigned"):
        request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    botocore.auth.S3SigV4Auth(credentials, "s3", spec["region"]).add_auth(request)
    print(json.dumps({name.lower(): value for name, value in request.headers.items()}))


def download(bucket, prefix, destination):
    s3 = client()
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": 7}):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            path = os.path.join(destination, item["Key"])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as output:
                output.write(body)
            found.append({"key": item["Key"], "size": item["Size"], "etag": item["ETag"], "read": len(body)})
    print(json.dumps(found))


def flip(bucket, key, offset):
    s3 = client()
    body = bytearray(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[offset] ^= 0x01
    s3.put_object(Bucket=bucket, Key=key, Body=bytes(body))


def list_keys(bucket, prefix):
    s3 = client()
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [item["Key"][len(prefix):] for item in page.get("Contents", [])]
    print(json.dumps(keys))


def get(bucket, key, path):
    with open(path, "wb") as output:
        output.write(client().get_object(Bucket=bucket, Key=key)["Body"].read())


def put(bucket, key, path):
    with open(path, "rb") as source:
        client().put_object(Bucket=bucket, Key=key, Body=source.read())


def delete(bucket, key):
    client().delete_object(Bucket=bucket, Key=key)


def create_bucket(bucket):
    s3 = client()
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass


if __name__ == "__main__":
    command, arguments = sys.argv[1], sys.argv[2:]
    if command == "sign":
        sign()
    elif command == "create-bucket":
        create_bucket(arguments[0])
    elif command == "download":
        download(arguments[0], arguments[1], arguments[2])
    elif command == "flip":
        flip(arguments[0], arguments[1], int(arguments[2]))
    elif command == "list":
        list_keys(arguments[0], arguments[1])
    elif command == "get":
        get(arguments[0], arguments[1], arguments[2])
    elif command == "put":
        put(arguments[0], arguments[1], arguments[2])
    elif command == "delete":
        delete(arguments[0], arguments[1])
    else:
        sys.exit("unknown command " + command)
