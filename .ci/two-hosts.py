#!/usr/bin/env python3
"""The programs .ci/two-hosts runs on its "hosts" (network namespaces): a service writing, a reader on the follower,
and boto3 on the bucket. Not a test on its own; see .ci/two-hosts.

  create DB KEYFILE                 a new database (SQLCipher 3 format, WAL) with the table `entry`
  write DB KEYFILE --host NAME ...  commits one row per transaction (its sequence number and commit time), paced
  watch DB KEYFILE --out FILE       reads the follower's copy from another process: when each row first became
                                    readable, and whether any read ever saw a gap (a half-applied state)
  lag FILE [--after T]              p50/p99/max of commit -> readable from a `watch` file
  big DB KEYFILE --megabytes N      a database of about N MB (for the cold-start measurement)
  s3 ENDPOINT BUCKET ...            mkbucket | list PREFIX | flip KEY (one byte in the middle, written back)

The database is SQLCipher 3's format (cipher_compatibility = 3): the sqlcipherkit CLI of the system package (3.4.1)
opens it, and python's sqlcipher3 (4.x) writes it. The key comes from the key file (x'<hex>'), never from argv.
"""
import json
import os
import signal
import sys
import time


def connect(path, key_file, create=False):
    import sqlcipher3

    if not create and not os.path.exists(path):
        raise SystemExit(f"{path} does not exist")
    with open(key_file) as handle:
        key = handle.read().strip()
    db = sqlcipher3.connect(path, timeout=30, isolation_level=None)
    db.execute('PRAGMA key = "%s"' % key)
    db.execute("PRAGMA cipher_compatibility = 3")
    db.execute("PRAGMA busy_timeout = 30000")
    return db


def create(path, key_file):
    db = connect(path, key_file, create=True)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(
        "CREATE TABLE entry(seq INTEGER PRIMARY KEY, host TEXT NOT NULL, committed REAL NOT NULL, payload BLOB)")
    db.close()
    os.chmod(path, 0o600)


def write(argv):
    """One row per transaction at --rate rows/s (paced against a schedule, not slept between), --count rows or until
    killed. Prints `first-ack SEQ TIME` after its first commit, `acked SEQ TIME` about 10 times a second and `done
    LAST COUNT` at the end: a row is acknowledged once its COMMIT returned."""
    import argparse

    parser = argparse.ArgumentParser(prog="two-hosts.py write")
    parser.add_argument("db")
    parser.add_argument("key_file")
    parser.add_argument("--host", required=True)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--payload", type=int, default=200)
    # NORMAL by default: in WAL mode a commit survives the process's death either way (only the machine's loses it), and
    # a writer whose every commit waits for a flush holds the write lock nearly all the time on a loaded machine.
    parser.add_argument("--synchronous", default=os.environ.get("TWO_HOSTS_SYNCHRONOUS", "NORMAL"))
    args = parser.parse_args(argv)
    db = connect(args.db, args.key_file)
    db.execute("PRAGMA synchronous = %s" % {"FULL": "FULL", "NORMAL": "NORMAL"}[args.synchronous])
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    seq = db.execute("SELECT coalesce(max(seq), 0) FROM entry").fetchone()[0]
    payload = os.urandom(args.payload // 2).hex().encode()[: args.payload]
    start = time.time()
    written = 0
    last_print = 0.0
    while not stopping and (args.count == 0 or written < args.count):
        due = start + written / args.rate
        now = time.time()
        if due > now:
            time.sleep(due - now)
        seq += 1
        db.execute("BEGIN IMMEDIATE")
        committed = time.time()
        db.execute("INSERT INTO entry(seq, host, committed, payload) VALUES (?, ?, ?, ?)",
                   (seq, args.host, committed, payload))
        db.execute("COMMIT")
        acked = time.time()
        written += 1
        if written == 1:
            print(f"first-ack {seq} {acked:.6f}", flush=True)
        if acked - last_print >= 0.1:
            print(f"acked {seq} {acked:.6f}", flush=True)
            last_print = acked
    print(f"acked {seq} {time.time():.6f}", flush=True)
    print(f"done {seq} {written} {written / max(time.time() - start, 1e-9):.1f}/s", flush=True)
    db.close()


def watch(argv):
    """Polls the copy every --interval: each read is one read transaction that must see rows 1..max with no gap (one
    shipped commit at a time). Appends `SEQ COMMITTED SEEN` for every newly readable row to --out; on SIGTERM
    prints a JSON summary (reads, rows, gaps seen, errors)."""
    import argparse

    parser = argparse.ArgumentParser(prog="two-hosts.py watch")
    parser.add_argument("db")
    parser.add_argument("key_file")
    parser.add_argument("--out", required=True)
    parser.add_argument("--interval", type=float, default=0.02)
    args = parser.parse_args(argv)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    db = connect(args.db, args.key_file)
    db.execute("PRAGMA query_only = 1")
    seen = 0
    reads = 0
    gaps = []
    errors = []
    with open(args.out, "a") as out:
        while not stopping:
            try:
                db.execute("BEGIN")
                count, top = db.execute("SELECT count(*), coalesce(max(seq), 0) FROM entry").fetchone()
                rows = db.execute("SELECT seq, committed FROM entry WHERE seq > ? ORDER BY seq", (seen,)).fetchall()
                db.execute("COMMIT")
                now = time.time()
                reads += 1
                if count != top:
                    gaps.append({"count": count, "max": top, "at": now})
                for seq, committed in rows:
                    out.write(f"{seq} {committed:.6f} {now:.6f}\n")
                if rows:
                    out.flush()
                    seen = rows[-1][0]
            except Exception as error:  # the copy must answer throughout: every failure is counted and shown
                errors.append(f"{type(error).__name__}: {error}")
                try:
                    db.execute("ROLLBACK")
                except Exception:
                    pass
            time.sleep(args.interval)
    print(json.dumps({"reads": reads, "rows": seen, "gaps": gaps[:5], "gapCount": len(gaps),
                      "errors": errors[:5], "errorCount": len(errors)}), flush=True)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def lag(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="two-hosts.py lag")
    parser.add_argument("file")
    parser.add_argument("--after", type=float, default=0.0, help="only rows committed after this time")
    parser.add_argument("--before", type=float, default=float("inf"))
    args = parser.parse_args(argv)
    values = []
    with open(args.file) as handle:
        for line in handle:
            seq, committed, seen = line.split()
            if args.after <= float(committed) <= args.before:
                values.append(float(seen) - float(committed))
    if not values:
        print(json.dumps({"rows": 0}))
        return
    print(json.dumps({"rows": len(values), "p50": round(percentile(values, 0.50), 3),
                      "p99": round(percentile(values, 0.99), 3), "max": round(max(values), 3)}))


def big(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="two-hosts.py big")
    parser.add_argument("db")
    parser.add_argument("key_file")
    parser.add_argument("--megabytes", type=int, required=True)
    args = parser.parse_args(argv)
    create(args.db, args.key_file)
    db = connect(args.db, args.key_file)
    db.execute("PRAGMA synchronous = NORMAL")
    blob = 3000
    rows = args.megabytes * 1024 * 1024 // blob
    seq = 0
    while seq < rows:
        db.execute("BEGIN")
        for _ in range(min(2000, rows - seq)):
            seq += 1
            db.execute("INSERT INTO entry(seq, host, committed, payload) VALUES (?, 'bulk', ?, ?)",
                       (seq, time.time(), os.urandom(blob)))
        db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    print(f"rows {rows} bytes {os.path.getsize(args.db)}")


def s3(argv):
    import boto3
    from botocore.config import Config

    endpoint, bucket, command = argv[0], argv[1], argv[2]
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                        retries={"max_attempts": 1}))
    if command == "mkbucket":
        client.create_bucket(Bucket=bucket)
    elif command == "list":
        token = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = client.list_objects_v2(Bucket=bucket, Prefix=argv[3], **extra)
            for item in page.get("Contents", []):
                print(item["Key"])
            if not page.get("IsTruncated"):
                break
            token = page["NextContinuationToken"]
    elif command == "flip":
        key = argv[3]
        body = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        body[len(body) // 2] ^= 0x01
        client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
        again = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if again != bytes(body):
            raise SystemExit(f"the store did not keep the flipped object {key}")
        print(f"flipped byte {len(body) // 2} of {key} ({len(body)} bytes)")
    else:
        raise SystemExit(f"unknown s3 command {command}")


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    command, rest = sys.argv[1], sys.argv[2:]
    if command == "create":
        create(*rest)
    elif command == "write":
        write(rest)
    elif command == "watch":
        watch(rest)
    elif command == "lag":
        lag(rest)
    elif command == "big":
        big(rest)
    elif command == "s3":
        s3(rest)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
