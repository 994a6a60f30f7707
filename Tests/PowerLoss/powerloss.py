#!/usr/bin/env python3
"""Power-loss exploration (Docs/Durability.md; run by .ci/power-loss, sampled by the regular suite).

Each workload runs once under the recorder (recorder.c, LD_PRELOAD), which writes every state-changing file-system
call under the work folder to a trace, in order, with its bytes. From the trace this program builds the crash states a
conservative file-system model allows, each as real files in a fresh folder, and runs the checkers on every one.

The model (what may be on disk after a power cut at a point of the trace):
- A file's data written before its last fsync/fdatasync (of any descriptor of the file) is on disk. Data written
  since may be lost, block by block (4096-byte blocks of the file), in any combination and so in any order; a lost
  block of an appending write may also read back as zeros (the file grew, its data did not arrive).
- A directory operation (create, rename, link, unlink, mkdir, rmdir) is on disk once every directory it changes was
  fsynced after it. Before that it may be lost, alone or with others, in any combination that can be replayed in
  order (a rename of a file whose creation is lost is not a state). A rename is atomic: both names change or neither.
- fsync of a file does not make its name durable; sync_file_range is no flush at all; sync and syncfs flush all.
- Data and directory operations are independent: a name may arrive without its data, and data without its name.

The states explored (deduplicated by content):
- every prefix of the trace (a crash after each call) with everything before it applied (what SIGKILL leaves), with
  only what is durable applied, and with the last write torn after its first block;
- at the end of each window (just before each flush, and at the end): every subset of the window's lost-able
  directory operations when there are at most EXHAUSTIVE_DIR_OPS of them (otherwise their in-order prefixes, each
  one dropped alone, and RANDOM_DIR_SUBSETS random subsets), each with all and with none of the lost-able data; and
  RANDOM_STATES states drawn at random over both (blocks kept, lost or zeroed), from a fixed seed.

Acknowledged = the call returned: the CLI exited 0 (the driver appends an `ack` record to the trace after the exit),
or a writer printed `ack <label>` (the recorder records standard output). Every state at or after an ack must hold
what was acknowledged.

    powerloss.py run [--only a,b] [--summary FILE] [--seed N] [--keep DIR]
    powerloss.py self-check             # strace and the recorder on the same run must see the same calls
Environment: SQLCIPHERKIT_BIN (the CLI; built with --traits Replication for the replication workloads),
POWERLOSS_WRITER (sqlcipherkit-replication-benchmarks, --traits Services), SQLCIPHERKIT_EXPECTED_ENGINE (3 or 4: the
engine the binaries run on; .ci/sqlcipher4 sets 4).
"""

import argparse
import fcntl
import hashlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import sqlcipher3

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MARKER = b"POWERLOSS-PLAINTEXT-MARKER"
BLOCK = 4096
EXHAUSTIVE_DIR_OPS = 8
RANDOM_DIR_SUBSETS = 32
RANDOM_STATES = int(os.environ.get("POWERLOSS_RANDOM_STATES", "16"))
TEMP_MARKER = ".sqlcipherkit-tmp-"

O_TRUNC = 0o1000
O_CREAT = 0o100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def engine():
    return 4 if os.environ.get("SQLCIPHERKIT_EXPECTED_ENGINE", "").startswith("4") else 3


# ---------------------------------------------------------------------------------------------------------------------
# The recorder


def build_recorder(cache):
    """Compiles recorder.c into `cache` (again when the source is newer); returns the library's path."""
    source = os.path.join(HERE, "recorder.c")
    library = os.path.join(cache, "recorder.so")
    if os.path.exists(library) and os.path.getmtime(library) >= os.path.getmtime(source):
        return library
    os.makedirs(cache, exist_ok=True)
    compilers = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    for compiler in compilers:
        if shutil.which(compiler):
            partial = library + ".partial"
            subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-Wall", "-o", partial, source, "-ldl", "-lpthread"],
                           check=True)
            os.replace(partial, library)
            return library
    raise SystemExit("power-loss: no C compiler (cc, gcc or clang) to build the recorder")


def recorded_env(library, trace, root, stdout=False):
    env = dict(os.environ)
    env["LD_PRELOAD"] = library + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env["POWERLOSS_TRACE"] = trace
    env["POWERLOSS_ROOT"] = root
    if stdout:
        env["POWERLOSS_STDOUT"] = "1"
    else:
        env.pop("POWERLOSS_STDOUT", None)
    return env


def append_marker(trace, record):
    """Appends a record of the driver (an ack) under the recorder's lock, so it lands between two calls."""
    with open(trace, "a") as handle:
        fcntl.lockf(handle, fcntl.LOCK_EX, 1, 0)
        handle.write(json.dumps(record) + "\n")
        handle.flush()
        fcntl.lockf(handle, fcntl.LOCK_UN, 1, 0)


def read_trace(path):
    records = []
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line:
                record = json.loads(line)
                if "data" in record:
                    record["data"] = bytes.fromhex(record["data"])
                records.append(record)
    return records


# ---------------------------------------------------------------------------------------------------------------------
# The model


def parent(rel):
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


class Op:
    __slots__ = ("index", "kind", "inode", "path", "path2", "dirs", "offset", "data", "size", "flags", "label",
                 "mode", "durable_at", "extends")

    def __init__(self, kind, **fields):
        self.kind = kind
        self.index = -1
        self.inode = self.path = self.path2 = self.offset = self.data = self.size = self.flags = None
        self.label = self.mode = None
        self.dirs = ()
        self.durable_at = None
        self.extends = False
        for name, value in fields.items():
            setattr(self, name, value)

    @property
    def is_dir_op(self):
        return self.kind in ("create", "rename", "link", "unlink", "mkdir", "rmdir")

    @property
    def is_data_op(self):
        return self.kind in ("write", "trunc", "extend")

    @property
    def is_flush(self):
        return self.kind in ("fsync", "fsyncdir", "syncall")

    def blocks(self):
        """The 4096-byte blocks of the file a write touches, as (start, end) offsets within its data."""
        if self.kind != "write":
            return [(0, 0)]
        pieces = []
        position = self.offset
        end = self.offset + len(self.data)
        while position < end:
            block_end = min(end, (position // BLOCK + 1) * BLOCK)
            pieces.append((position - self.offset, block_end - self.offset))
            position = block_end
        return pieces or [(0, 0)]

    def describe(self):
        if self.kind == "write":
            return f"write {self.path} [{self.offset}, +{len(self.data)}]"
        if self.kind in ("rename", "link"):
            return f"{self.kind} {self.path} -> {self.path2}"
        if self.kind in ("trunc", "extend"):
            return f"{self.kind} {self.path} to {self.size}"
        if self.kind == "ack":
            return f"ack {self.label}"
        return f"{self.kind} {self.path or ''}".strip()


class Trace:
    """The trace as operations on the model: names (paths relative to the root) and inodes (numbered here)."""

    def __init__(self, records, root, initial):
        self.root = root.rstrip("/")
        self.initial_names = {"": "dir"}   # rel -> inode number, or "dir" ("" is the root)
        self.initial_content = {}    # inode -> bytes
        self.modes = {}              # inode -> mode given at creation
        next_inode = 0
        for rel, content in sorted(initial.items()):
            if content is None:
                self.initial_names[rel] = "dir"
            else:
                next_inode += 1
                self.initial_names[rel] = next_inode
                self.initial_content[next_inode] = content
        self.ops = []
        self.notes = []
        live = dict(self.initial_names)
        descriptors = {}   # (pid, fd) -> inode or ("dir", rel)

        def rel_of(path):
            if path is None:
                return None
            if path == self.root:
                return ""
            if path.startswith(self.root + "/"):
                return path[len(self.root) + 1:]
            return None

        def add(op):
            op.index = len(self.ops)
            self.ops.append(op)

        for record in records:
            kind = record["op"]
            pid = record.get("pid")
            rel = rel_of(record.get("path"))
            if kind == "open":
                key = (pid, record["fd"])
                if record.get("dir"):
                    descriptors[key] = ("dir", rel)
                    continue
                if record.get("created"):
                    next_inode += 1
                    inode = next_inode
                    self.modes[inode] = record.get("mode", 0)
                    add(Op("create", path=rel, inode=inode, dirs=(parent(rel),), mode=record.get("mode", 0)))
                    live[rel] = inode
                else:
                    inode = live.get(rel)
                    if not isinstance(inode, int):
                        raise RuntimeError(f"the trace opens {rel}, which the model does not know (a missed call?)")
                    if record.get("flags", 0) & O_TRUNC:
                        add(Op("trunc", path=rel, inode=inode, size=0))
                descriptors[key] = inode
            elif kind == "dup":
                source = descriptors.get((pid, record["fd"]))
                if source is not None:
                    descriptors[(pid, record["fd2"])] = source
            elif kind == "close":
                descriptors.pop((pid, record["fd"]), None)
            elif kind == "write":
                inode = descriptors.get((pid, record["fd"]))
                if not isinstance(inode, int):
                    raise RuntimeError(f"a write to {rel} through a descriptor the model does not know")
                add(Op("write", path=rel, inode=inode, offset=record["off"], data=record["data"]))
            elif kind in ("truncate", "extend"):
                inode = descriptors.get((pid, record["fd"])) if "fd" in record else live.get(rel)
                if not isinstance(inode, int):
                    raise RuntimeError(f"a {kind} of {rel} the model cannot place")
                add(Op("trunc" if kind == "truncate" else "extend", path=rel, inode=inode, size=record["size"]))
            elif kind == "fsync":
                target = descriptors.get((pid, record["fd"]))
                if isinstance(target, tuple):
                    add(Op("fsyncdir", path=target[1]))
                elif isinstance(target, int):
                    add(Op("fsync", path=rel, inode=target))
                else:
                    raise RuntimeError(f"an fsync of {rel} through a descriptor the model does not know")
            elif kind == "syncall":
                add(Op("syncall"))
            elif kind == "sync_file_range":
                self.notes.append(f"sync_file_range on {rel} (not a flush)")
            elif kind in ("rename", "link"):
                rel2 = rel_of(record.get("path2"))
                if rel is None or rel2 is None:
                    raise RuntimeError(f"a {kind} across the root: {record.get('path')} -> {record.get('path2')}")
                flags = record.get("flags", 0)
                add(Op(kind, path=rel, path2=rel2, dirs=tuple(sorted({parent(rel), parent(rel2)})), flags=flags))
                apply_names(live, self.ops[-1])
            elif kind in ("unlink", "rmdir", "mkdir"):
                add(Op(kind, path=rel, dirs=(parent(rel),)))
                apply_names(live, self.ops[-1])
            elif kind == "symlink":
                raise RuntimeError(f"a symbolic link was made under the root ({rel}); the model has none")
            elif kind == "stdout":
                for line in record["data"].decode("utf-8", "replace").splitlines():
                    if line.startswith("ack "):
                        add(Op("ack", label=line[4:].strip()))
            elif kind == "ack":
                add(Op("ack", label=record["label"]))
            else:
                raise RuntimeError(f"unknown record {kind}")
        self._durability()
        self.final_names = live

    def _durability(self):
        """Where each operation becomes durable: the index of the flush that makes it so (None: never)."""
        last_sync_all = None
        next_dir_sync = {}    # dir -> index of the next fsync of it (scanning backwards)
        next_file_sync = {}
        for op in reversed(self.ops):
            if op.kind == "syncall":
                last_sync_all = op.index
                next_dir_sync = {}
                next_file_sync = {}
            elif op.kind == "fsyncdir":
                next_dir_sync[op.path] = op.index
            elif op.kind == "fsync":
                next_file_sync[op.inode] = op.index
            elif op.is_dir_op:
                points = [next_dir_sync.get(d) for d in op.dirs]
                op.durable_at = max(points) if all(p is not None for p in points) else last_sync_all
            elif op.is_data_op:
                op.durable_at = next_file_sync.get(op.inode, last_sync_all)

    def acks_before(self, point):
        return {op.label for op in self.ops[:point] if op.kind == "ack"}

    def window_ends(self):
        points = [op.index for op in self.ops if op.is_flush]
        return sorted(set(points + [len(self.ops)]))


class Impossible(Exception):
    pass


def apply_names(names, op):
    """Applies a directory operation to a name map; raises Impossible when it cannot be replayed there.

    An operation inside a folder whose own creation was lost happens in a subtree no name reaches (after the power
    cut it is an orphan, gone or in lost+found): it changes no visible name, and the state is possible."""
    def reachable(rel):
        return rel == "" or names.get(rel) == "dir"

    kind = op.kind
    if kind in ("create", "mkdir"):
        if not reachable(parent(op.path)):
            return
        if op.path in names:
            raise Impossible()
        names[op.path] = op.inode if kind == "create" else "dir"
    elif kind in ("unlink", "rmdir"):
        if not reachable(parent(op.path)):
            return
        if kind == "unlink" and not isinstance(names.get(op.path), int):
            raise Impossible()
        if kind == "rmdir" and (names.get(op.path) != "dir" or any(k.startswith(op.path + "/") for k in names)):
            raise Impossible()
        del names[op.path]
    elif kind == "link":
        if not reachable(parent(op.path)) or not reachable(parent(op.path2)):
            return
        if not isinstance(names.get(op.path), int) or op.path2 in names:
            raise Impossible()
        names[op.path2] = names[op.path]
    elif kind == "rename":
        if not reachable(parent(op.path)):
            return
        if op.path not in names:
            raise Impossible()
        if op.flags & RENAME_EXCHANGE:
            if op.path2 not in names:
                raise Impossible()
            names[op.path], names[op.path2] = names[op.path2], names[op.path]
            return
        if op.flags & RENAME_NOREPLACE and op.path2 in names:
            raise Impossible()
        if op.path == op.path2:
            return
        moved = names.pop(op.path)
        children = {}
        if moved == "dir":
            for key in [k for k in names if k.startswith(op.path + "/")]:
                children[op.path2 + key[len(op.path):]] = names.pop(key)
        if reachable(parent(op.path2)):
            names[op.path2] = moved
            names.update(children)


class Choice:
    """One crash state: the prefix (calls before `point` happened), which lost-able directory operations made it,
    and what became of each lost-able data block ("keep", "drop" or "zero")."""

    def __init__(self, point, name, keep_dirs=None, data=None, block_choice=None):
        self.point = point
        self.name = name
        self.keep_dirs = keep_dirs        # None: all kept; else the set of kept lost-able dir-op indices
        self.data = data                  # "all", "none" or "blocks"
        self.block_choice = block_choice or {}   # (op index, block) -> "keep" | "drop" | "zero"

    def describe(self, trace):
        lost_dirs = [op.describe() for op in trace.ops[:self.point]
                     if op.is_dir_op and not durable(op, self.point)
                     and self.keep_dirs is not None and op.index not in self.keep_dirs]
        last = trace.ops[self.point - 1].describe() if self.point > 0 else "(nothing)"
        text = f"crash after call {self.point} ({last}); {self.name}"
        if lost_dirs:
            text += "; lost: " + ", ".join(lost_dirs)
        if self.data == "none":
            text += "; unflushed data lost"
        return text


def durable(op, point):
    return op.durable_at is not None and op.durable_at < point


def build_state(trace, choice):
    """The files of a crash state: rel -> bytes (files) or None (folders). Raises Impossible."""
    names = dict(trace.initial_names)
    point = choice.point
    for op in trace.ops[:point]:
        if op.is_dir_op and (durable(op, point) or choice.keep_dirs is None or op.index in choice.keep_dirs):
            apply_names(names, op)
    wanted = {inode for inode in names.values() if isinstance(inode, int)}
    contents = {inode: bytearray(trace.initial_content.get(inode, b"")) for inode in wanted}
    for op in trace.ops[:point]:
        if not op.is_data_op or op.inode not in wanted:
            continue
        content = contents[op.inode]
        if durable(op, point) or choice.data == "all" or choice.data is None:
            apply_data(content, op, None)
        elif choice.data == "none":
            continue
        else:
            apply_data(content, op, lambda block: choice.block_choice.get((op.index, block), "keep"))
    files = {}
    for rel, inode in names.items():
        if rel:
            files[rel] = None if inode == "dir" else bytes(contents[inode])
    return files


def apply_data(content, op, choose):
    if op.kind == "trunc":
        if choose is None or choose(0) == "keep":
            if op.size < len(content):
                del content[op.size:]
            else:
                content.extend(b"\0" * (op.size - len(content)))
        return
    if op.kind == "extend":
        if (choose is None or choose(0) == "keep") and op.size > len(content):
            content.extend(b"\0" * (op.size - len(content)))
        return
    for number, (start, end) in enumerate(op.blocks()):
        what = "keep" if choose is None else choose(number)
        offset = op.offset + start
        if what == "drop":
            continue
        piece = op.data[start:end] if what == "keep" else b"\0" * (end - start)
        if what == "zero" and offset + len(piece) <= len(content):
            continue   # zeros only where the file grew: old data is not replaced by zeros
        if len(content) < offset:
            content.extend(b"\0" * (offset - len(content)))
        content[offset:offset + len(piece)] = piece


def state_hash(files):
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0")
        content = files[rel]
        digest.update(b"D" if content is None else b"F" + hashlib.sha256(content).digest())
    return digest.hexdigest()


def choices(trace, seed):
    """The crash states to explore (see the module's documentation), in trace order."""
    rng = random.Random(seed)
    ends = set(trace.window_ends())
    for point in range(len(trace.ops) + 1):
        yield Choice(point, "all before it applied (SIGKILL)")
        yield Choice(point, "only flushed calls applied", keep_dirs=set(), data="none")
        if point > 0 and trace.ops[point - 1].kind == "write" and len(trace.ops[point - 1].blocks()) > 1 \
                and not durable(trace.ops[point - 1], point):
            last = trace.ops[point - 1]
            torn = {(last.index, block): "drop" for block in range(1, len(last.blocks()))}
            yield Choice(point, "last write torn after its first block", data="blocks", block_choice=torn)
        if point not in ends:
            continue
        lost_dirs = [op.index for op in trace.ops[:point] if op.is_dir_op and not durable(op, point)]
        lost_data = [op for op in trace.ops[:point] if op.is_data_op and not durable(op, point)]
        if lost_dirs:
            if len(lost_dirs) <= EXHAUSTIVE_DIR_OPS:
                subsets = [set(s) for r in range(len(lost_dirs) + 1) for s in itertools.combinations(lost_dirs, r)]
            else:
                subsets = [set(lost_dirs[:k]) for k in range(len(lost_dirs) + 1)]
                subsets += [set(lost_dirs) - {d} for d in lost_dirs]
                subsets += [{d for d in lost_dirs if rng.random() < 0.5} for _ in range(RANDOM_DIR_SUBSETS)]
            for subset in subsets:
                yield Choice(point, "directory operations kept: a subset", keep_dirs=subset, data="all")
                if lost_data:
                    yield Choice(point, "directory operations kept: a subset; unflushed data lost",
                                 keep_dirs=subset, data="none")
        if lost_data or lost_dirs:
            for _ in range(RANDOM_STATES):
                keep = {d for d in lost_dirs if rng.random() < 0.5}
                blocks = {}
                for op in lost_data:
                    for number in range(len(op.blocks())):
                        roll = rng.random()
                        blocks[(op.index, number)] = "keep" if roll < 0.5 else ("drop" if roll < 0.85 else "zero")
                yield Choice(point, "random: lost directory operations and blocks", keep_dirs=keep, data="blocks",
                             block_choice=blocks)


# ---------------------------------------------------------------------------------------------------------------------
# Materializing and checking


def materialize(files, folder):
    os.makedirs(folder, exist_ok=True)
    for rel in sorted(files, key=lambda r: r.count("/")):
        path = os.path.join(folder, rel)
        if files[rel] is None:
            os.makedirs(path, exist_ok=True)
    for rel, content in files.items():
        if content is not None:
            path = os.path.join(folder, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(content)
            os.chmod(path, 0o600)


class Scratch:
    """Fresh folders for one state's checks (each database open gets its own copy: a hot journal or a WAL that one
    open replays must not change what the next one sees)."""

    def __init__(self, base, files):
        self.base = base
        self.files = files
        self.count = 0

    def fresh(self):
        self.count += 1
        folder = os.path.join(self.base, f"s{self.count}")
        shutil.rmtree(folder, ignore_errors=True)
        materialize(self.files, folder)
        return folder


def read_key_text(content):
    return content.decode("utf-8", "replace").strip()


def open_db(path, key_text, compatibility):
    """A connection of the checker's own engine (python sqlcipher3, SQLCipher 4), or None when the key does not
    open the file."""
    connection = sqlcipher3.connect(path, isolation_level=None)
    try:
        # A wrong key is an expected outcome here, not news for standard error.
        connection.execute("PRAGMA cipher_log_level = NONE").fetchall()
        if key_text is not None:
            escaped = key_text.replace('"', '""')
            connection.execute(f'PRAGMA key = "{escaped}"')
            if compatibility == 3:
                connection.execute("PRAGMA cipher_compatibility = 3")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return connection
    except sqlcipher3.DatabaseError:
        connection.close()
        return None


def integrity_problems(connection, encrypted=True):
    """quick_check, and cipher_integrity_check after a checkpoint: the cipher's check reads the main file's pages
    directly, so frames still in the WAL (a committed rekey not yet copied back) would read as damage. The
    checkpoint is what the next writer would do; it runs on the checker's own copy."""
    problems = []
    if str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            problems.append("the WAL could not be checkpointed")
    rows = [r[0] for r in connection.execute("PRAGMA quick_check").fetchall()]
    if rows != ["ok"]:
        problems.append(f"quick_check: {rows[:3]}")
    if encrypted:
        damage = [r[0] for r in connection.execute("PRAGMA cipher_integrity_check").fetchall()]
        damage = [d for d in damage if "HMAC is not enabled" not in str(d)]
        if damage:
            problems.append(f"cipher_integrity_check: {damage[:3]}")
    return problems


def table_digest(connection):
    rows = connection.execute("SELECT id, body FROM note ORDER BY id").fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest(), len(rows)


def which_keys_open(scratch, rel, keys, settings):
    """The labels of `keys` ({label: key text}) that open the database at `rel`, and the problems of the first that
    does (integrity, content digest). Each attempt on a fresh copy."""
    opened = []
    details = {}
    for label, key_text in keys.items():
        for compatibility in settings:
            folder = scratch.fresh()
            connection = open_db(os.path.join(folder, rel), key_text, compatibility)
            if connection is None:
                continue
            try:
                problems = integrity_problems(connection)
                digest = table_digest(connection) if not problems else (None, 0)
                details[label] = (compatibility, problems, digest)
            except sqlcipher3.DatabaseError as error:
                details[label] = (compatibility, [f"reading failed: {error}"], (None, 0))
            finally:
                connection.close()
            opened.append(label)
            break
    return opened, details


# ---------------------------------------------------------------------------------------------------------------------
# Workloads


class Context:
    def __init__(self, work, cli, writer, library):
        self.work = work
        self.cli = cli
        self.writer = writer
        self.library = library
        self.trace = os.path.join(os.path.dirname(work), "trace.jsonl")
        self.keys = {}          # label -> key text (the key files the setup made)
        self.expected = {}      # name -> (digest, rows)
        self.extra = {}

    def run_cli(self, *arguments, recorded=False, check=True, input_text=None, label=None):
        env = recorded_env(self.library, self.trace, self.work) if recorded else dict(os.environ)
        result = subprocess.run([self.cli, *arguments], env=env, cwd=self.work, capture_output=True,
                                input=input_text, text=True, timeout=600)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(arguments)} exited {result.returncode}: {result.stderr.strip()}")
        if recorded and result.returncode == 0 and label:
            append_marker(self.trace, {"op": "ack", "label": label})
        return result

    def keygen(self, name):
        path = os.path.join(self.work, name)
        self.run_cli("keygen", "--out", path)
        with open(path, "rb") as handle:
            self.keys[name] = read_key_text(handle.read())
        return path

    def make_db(self, name, key_name, rows=40, journal="delete", compatibility=None):
        body = (f"printf('{MARKER.decode()}-%d-%s', i, substr(replace(hex(zeroblob(3000)), '00', 'xy'), 1,"
                f" (i * 379) % 5000 + 10))")
        sql = (f"PRAGMA journal_mode = {journal}; CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT NOT NULL);"
               f" WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {rows})"
               f" INSERT INTO note SELECT i, {body} FROM c;")
        options = ["--cipher-compatibility", str(compatibility)] if compatibility else []
        if key_name is None:
            self.run_cli("exec", name, "--plaintext", "--allow-plaintext", "--create", sql)
        else:
            self.run_cli("exec", name, "--key-file", key_name, "--create", *options, sql)
        self.expected[name] = self.digest_of(name, key_name, compatibility)

    def digest_of(self, name, key_name, compatibility=None):
        settings = [compatibility] if compatibility else [engine()]
        connection = open_db(os.path.join(self.work, name), self.keys[key_name] if key_name else None,
                             settings[0])
        if connection is None:
            raise RuntimeError(f"setup: {name} does not open")
        try:
            return table_digest(connection)
        finally:
            connection.close()


class Workload:
    name = ""
    needs = ()            # "writer", "replication", "engine4"
    plaintext = ()        # names (prefixes) that may hold the marker
    key_files = (".key",)  # suffixes/infixes of names that may hold key bytes

    def setup(self, ctx):
        pass

    def run(self, ctx):
        raise NotImplementedError

    def check(self, ctx, state, acked):
        return []

    # helpers
    def may_hold_plaintext(self, rel):
        return any(rel == p or rel.startswith(p + TEMP_MARKER) or rel.startswith(p + "-") for p in self.plaintext)

    def may_hold_key(self, rel):
        name = rel.rsplit("/", 1)[-1]
        return any(part in name for part in self.key_files)


def expect_database(ctx, state, rel, keys, must, expected, settings=None):
    """`rel` opens with exactly one of `keys` ({label: text}); `must` (a label) when the call was acknowledged;
    quick_check and cipher_integrity_check pass; its rows are `expected`."""
    settings = settings or [engine()]
    if rel not in state.files:
        return [f"{rel} is missing"]
    opened, details = which_keys_open(state, rel, keys, settings)
    if len(opened) != 1:
        return [f"{rel} opens with {len(opened)} of the keys {sorted(keys)} (it must open with exactly one)"]
    problems = []
    label = opened[0]
    if must is not None and label != must:
        problems.append(f"{rel} opens with {label}, but {must} was acknowledged")
    _, integrity, digest = details[label]
    problems += [f"{rel}: {p}" for p in integrity]
    if not integrity and expected is not None and digest != expected:
        problems.append(f"{rel}: its rows differ from the original's ({digest[1]} rows, {expected[1]} expected)")
    return problems


def expect_copy(ctx, state, rel, key_label, complete, expected, plaintext=False):
    """A destination is absent, or complete (opens, verifies, same rows); complete when acknowledged."""
    if rel not in state.files:
        return [f"{rel} is missing after it was acknowledged"] if complete else []
    folder = state.fresh()
    connection = open_db(os.path.join(folder, rel), None if plaintext else ctx.keys[key_label], engine())
    if connection is None:
        return [f"{rel} exists but does not open"]
    try:
        problems = integrity_problems(connection, encrypted=not plaintext)
        if not problems:
            digest = table_digest(connection)
            if digest != expected:
                problems.append(f"{rel}: {digest[1]} rows that differ from the source's {expected[1]}")
    except sqlcipher3.DatabaseError as error:
        problems = [f"{rel}: reading failed: {error}"]
    finally:
        connection.close()
    return problems


class Keygen(Workload):
    name = "keygen"

    def run(self, ctx):
        ctx.run_cli("keygen", "--out", os.path.join(ctx.work, "new.key"), recorded=True, label="keygen")

    def check(self, ctx, state, acked):
        if "keygen" not in acked:
            return []
        content = state.files.get("new.key")
        written = ctx.extra.get("written")
        if content is None:
            return ["new.key is missing after keygen reported success"]
        if content != written:
            return [f"new.key holds {len(content)} bytes, not the {len(written)} keygen wrote"]
        return []

    def after_run(self, ctx, trace):
        inode = trace.final_names.get("new.key")
        data = bytearray()
        for op in trace.ops:
            if op.inode == inode and op.is_data_op:
                apply_data(data, op, None)
        ctx.extra["written"] = bytes(data)


class Rotate(Workload):
    def __init__(self, method, journal, databases=1):
        self.method = method
        self.journal = journal
        self.databases = [f"db{i}.db" for i in range(1, databases + 1)]
        batch = "-batch" if databases > 1 else ""
        self.name = f"rotate-{method}{batch}-{journal}"

    def setup(self, ctx):
        ctx.keygen("old.key")
        ctx.keygen("new.key")
        for db in self.databases:
            ctx.make_db(db, "old.key", journal=self.journal)

    def run(self, ctx):
        ctx.run_cli("rotate", *self.databases, "--key-file", "old.key", "--new-key-file", "new.key", "--method",
                    self.method, recorded=True, label="rotate")

    def check(self, ctx, state, acked):
        keys = {"old.key": ctx.keys["old.key"], "new.key": ctx.keys["new.key"]}
        problems = []
        for db in self.databases:
            problems += expect_database(ctx, state, db, keys, "new.key" if "rotate" in acked else None,
                                        ctx.expected[db])
        return problems


class Backup(Workload):
    name = "backup"

    def setup(self, ctx):
        ctx.keygen("db.key")
        ctx.make_db("src.db", "db.key", journal="wal")

    def run(self, ctx):
        ctx.run_cli("backup", "src.db", "copy.db", "--key-file", "db.key", recorded=True, label="backup")

    def check(self, ctx, state, acked):
        return (expect_database(ctx, state, "src.db", {"db.key": ctx.keys["db.key"]}, "db.key",
                                ctx.expected["src.db"])
                + expect_copy(ctx, state, "copy.db", "db.key", "backup" in acked, ctx.expected["src.db"]))


class Encrypt(Workload):
    name = "encrypt"
    plaintext = ("plain.db",)

    def setup(self, ctx):
        ctx.keygen("new.key")
        ctx.make_db("plain.db", None)

    def run(self, ctx):
        ctx.run_cli("encrypt", "plain.db", "enc.db", "--new-key-file", "new.key", recorded=True, label="encrypt")

    def check(self, ctx, state, acked):
        problems = expect_copy(ctx, state, "plain.db", None, True, ctx.expected["plain.db"], plaintext=True)
        return problems + expect_copy(ctx, state, "enc.db", "new.key", "encrypt" in acked, ctx.expected["plain.db"])


class Decrypt(Workload):
    name = "decrypt"
    plaintext = ("plain.db",)

    def setup(self, ctx):
        ctx.keygen("db.key")
        ctx.make_db("enc.db", "db.key")

    def run(self, ctx):
        ctx.run_cli("decrypt", "enc.db", "plain.db", "--key-file", "db.key", "--allow-plaintext", recorded=True,
                    label="decrypt")

    def check(self, ctx, state, acked):
        problems = expect_database(ctx, state, "enc.db", {"db.key": ctx.keys["db.key"]}, "db.key",
                                   ctx.expected["enc.db"])
        problems += expect_copy(ctx, state, "plain.db", None, "decrypt" in acked, ctx.expected["enc.db"],
                                plaintext=True)
        for rel in state.files:
            if rel.startswith("plain.db" + TEMP_MARKER) and not rel.endswith(("-journal", "-wal", "-shm")):
                inode = state.trace.final_names.get(rel)
                mode = state.trace.modes.get(inode)
                if mode is not None and mode & 0o077:
                    problems.append(f"{rel} (a plaintext temporary) was created with mode {oct(mode)}")
        return problems


class Migrate(Workload):
    name = "migrate"
    needs = ("engine4",)

    def setup(self, ctx):
        ctx.keygen("db.key")
        ctx.make_db("legacy.db", "db.key", compatibility=3)

    def run(self, ctx):
        ctx.run_cli("migrate", "legacy.db", "--key-file", "db.key", recorded=True, label="migrate")

    def check(self, ctx, state, acked):
        key = ctx.keys["db.key"]
        rel = "legacy.db"
        if rel not in state.files:
            return [f"{rel} is missing"]
        opened = []
        problems = []
        for compatibility in (3, 4):
            folder = state.fresh()
            connection = open_db(os.path.join(folder, rel), key, compatibility)
            if connection is None:
                continue
            opened.append(compatibility)
            try:
                problems += integrity_problems(connection)
                if not problems and table_digest(connection) != ctx.expected[rel]:
                    problems.append(f"{rel}: its rows differ after migrate")
            finally:
                connection.close()
        if len(opened) != 1:
            return [f"{rel} opens with {len(opened)} of the SQLCipher 3 and 4 settings (exactly one expected)"]
        if "migrate" in acked and opened != [4]:
            problems.append(f"{rel} is still in SQLCipher 3's format after migrate reported success")
        return problems


def writer_rows_problems(connection, acked_ids, label):
    problems = []
    rows = connection.execute("SELECT id, body FROM note ORDER BY id").fetchall()
    ids = [r[0] for r in rows]
    if ids != list(range(1, len(ids) + 1)):
        problems.append(f"{label}: ids are not 1..n: {ids[:10]}")
    for row_id, body in rows:
        if body != writer_body(row_id):
            problems.append(f"{label}: row {row_id} has another body")
            break
    ledger = connection.execute("SELECT count, total FROM ledger").fetchall()
    n = len(ids)
    if ledger != [(n, n * (n + 1) // 2)]:
        problems.append(f"{label}: the ledger {ledger} does not match {n} rows")
    if acked_ids and n < max(acked_ids):
        problems.append(f"{label}: {n} rows, but commit {max(acked_ids)} was acknowledged")
    return problems


def writer_body(row_id):
    """CrashWriter.body(of:)."""
    unit = f"row {row_id} "
    length = (row_id * 7919) % 6000 + 20
    return (unit * (length // len(unit) + 1))[:length]


class PoolCommits(Workload):
    needs = ("writer",)

    def __init__(self, mode, journal=None):
        self.mode = mode
        self.journal = journal
        self.name = "pool-commits-wal" if mode == "pool" else f"queue-commits-{journal}"

    def setup(self, ctx):
        ctx.keygen("db.key")

    def run(self, ctx):
        arguments = [ctx.writer, "power-loss", self.mode, "--database", os.path.join(ctx.work, "db.db"),
                     "--key-file", os.path.join(ctx.work, "db.key"), "--commits", "4"]
        if self.journal:
            arguments += ["--journal", self.journal]
        result = subprocess.run(arguments, env=recorded_env(ctx.library, ctx.trace, ctx.work, stdout=True),
                                capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(f"the writer exited {result.returncode}: {result.stderr.strip()}")

    def check(self, ctx, state, acked):
        acked_ids = [int(a) for a in acked if a.isdigit()]
        if "db.db" not in state.files:
            return ["db.db is missing after a commit was acknowledged"] if acked_ids else []
        folder = state.fresh()
        connection = open_db(os.path.join(folder, "db.db"), ctx.keys["db.key"], engine())
        if connection is None:
            if not acked_ids and not state.files["db.db"]:
                return []
            return ["db.db does not open with its key"]
        try:
            problems = integrity_problems(connection)
            tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
            if "note" not in tables:
                return problems + (["db.db has no table, but a commit was acknowledged"] if acked_ids else [])
            return problems + writer_rows_problems(connection, acked_ids, "db.db")
        finally:
            connection.close()


class HandOver(Workload):
    name = "service-hand-over"
    needs = ("writer",)
    key_files = (".key",)

    def setup(self, ctx):
        ctx.keygen("db.key")
        ctx.keygen("db.key.next")   # the operator's pending key, handed over by the writer
        ctx.keys["new"] = ctx.keys["db.key.next"]

    def run(self, ctx):
        arguments = [ctx.writer, "power-loss", "hand-over", "--database", os.path.join(ctx.work, "db.db"),
                     "--key-file", os.path.join(ctx.work, "db.key"), "--commits", "2"]
        result = subprocess.run(arguments, env=recorded_env(ctx.library, ctx.trace, ctx.work, stdout=True),
                                capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(f"the writer exited {result.returncode}: {result.stderr.strip()}")

    def check(self, ctx, state, acked):
        acked_ids = [int(a) for a in acked if a.isdigit()]
        # The documented files, in the order the service tries them (Docs/Services.md).
        documented = ["db.key", "db.key.rotating", "db.key.next"]
        keys = {}
        problems = []
        for rel in documented:
            if rel in state.files:
                text = read_key_text(state.files[rel])
                if text not in (ctx.keys["db.key"], ctx.keys["new"]):
                    problems.append(f"{rel} holds neither the old nor the new key ({len(state.files[rel])} bytes)")
                    continue
                keys.setdefault(text, rel)
        if "db.db" not in state.files:
            return problems + (["db.db is missing after a commit was acknowledged"] if acked_ids else [])
        opened = []
        for text, rel in keys.items():
            folder = state.fresh()
            connection = open_db(os.path.join(folder, "db.db"), text, engine())
            if connection is None:
                continue
            try:
                problems += integrity_problems(connection)
                tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
                if "note" in tables:
                    problems += writer_rows_problems(connection, acked_ids, "db.db")
                elif acked_ids:
                    problems.append("db.db has no table, but a commit was acknowledged")
            finally:
                connection.close()
            # A database still empty after recovery (its creation was not committed) opens with any key: it
            # decides nothing.
            if tables:
                opened.append(rel)
        if len(opened) != 1 and (acked_ids or opened):
            problems.append(f"db.db opens with {len(opened)} of the keys the documented key files hold"
                            f" ({', '.join(f'{r}' for r in documented if r in state.files)})")
        if "rotated" in acked:
            if read_key_text(state.files.get("db.key", b"")) != ctx.keys["new"]:
                problems.append("db.key does not hold the new key after the hand-over was acknowledged")
        return problems


class ShellOutput(Workload):
    name = "shell-output"
    plaintext = ("out.txt",)

    def setup(self, ctx):
        ctx.keygen("db.key")
        ctx.make_db("db.db", "db.key")

    def run(self, ctx):
        script = ".output out.txt\nSELECT body FROM note;\n.output stdout\nINSERT INTO note(body) VALUES ('x');\n"
        result = ctx.run_cli("shell", "db.db", "--key-file", "db.key", "--allow-plaintext", recorded=True,
                             input_text=script, label="shell")
        ctx.extra["inserted"] = result.returncode == 0

    def check(self, ctx, state, acked):
        problems = []
        keys = {"db.key": ctx.keys["db.key"]}
        opened, details = which_keys_open(state, "db.db", keys, [engine()])
        if opened != ["db.key"]:
            problems.append("db.db does not open with its key")
        else:
            problems += details["db.key"][1]
            rows = details["db.key"][2][1]
            if "shell" in acked and rows != ctx.expected["db.db"][1] + 1:
                problems.append(f"db.db has {rows} rows; the shell's insert was acknowledged")
        return problems


class Replicate(Workload):
    name = "replicate-restore"
    needs = ("replication",)

    def setup(self, ctx):
        ctx.keygen("db.key")
        ctx.make_db("db.db", "db.key", rows=10, journal="wal")
        os.makedirs(os.path.join(ctx.work, "replica"))

    def run(self, ctx):
        env = recorded_env(ctx.library, ctx.trace, ctx.work)
        process = subprocess.Popen(
            [ctx.cli, "replicate", "db.db", "--key-file", "db.key", "--to", "file://" + ctx.work + "/replica",
             "--sync-interval", "100ms"], env=env, cwd=ctx.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            line = process.stderr.readline()
            while line and "replicating" not in line:
                line = process.stderr.readline()
            if not line:
                raise RuntimeError("replicate ended before its first sync: " + process.stderr.read())
            append_marker(ctx.trace, {"op": "ack", "label": "replicating"})
            stopped = process.pid
            if ctx.extra.get("traced"):
                # Under the self-check the process is strace, which would end and leave the command running.
                stopped = children_of(process.pid)[0]
            for number in range(1, 4):
                ctx.run_cli("exec", "db.db", "--key-file", "db.key",
                            f"INSERT INTO note(id, body) VALUES ({100 + number}, 'commit {number}')",
                            recorded=True, label=f"commit {number}")
            os.kill(stopped, signal.SIGTERM)
            _, rest = process.communicate(timeout=120)
            if process.returncode != 0:
                raise RuntimeError(f"replicate exited {process.returncode}: {rest}")
            append_marker(ctx.trace, {"op": "ack", "label": "replicated"})
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        ctx.extra["restores"] = {}

    def check(self, ctx, state, acked):
        problems = []
        commits = sorted(int(a.split()[1]) for a in acked if a.startswith("commit "))
        keys = {"db.key": ctx.keys["db.key"]}
        opened, details = which_keys_open(state, "db.db", keys, [engine()])
        if opened != ["db.key"]:
            problems.append("db.db does not open with its key")
        else:
            problems += details["db.key"][1]
            rows = details["db.key"][2][1]
            if commits and rows < 10 + max(commits):
                problems.append(f"db.db has {rows} rows; commit {max(commits)} was acknowledged")
        # The replica: restored by the CLI (not recorded), it must be a prefix of the commits.
        replica = {rel: content for rel, content in state.files.items() if rel == "replica"
                   or rel.startswith("replica/")}
        digest = state_hash(replica)
        cache = ctx.extra["restores"]
        if digest not in cache:
            cache[digest] = restore_outcome(ctx, state)
        outcome = cache[digest]
        if outcome is None:
            if "replicating" in acked:
                problems.append("the replica restores nothing, but replicate had made its first sync")
        elif isinstance(outcome, str):
            problems.append(outcome)
        else:
            restored_commits = outcome
            if "replicated" in acked and restored_commits != 3:
                problems.append(f"the replica restores {restored_commits} of 3 commits after replicate exited 0")
        return problems


def children_of(pid):
    """The processes whose parent is `pid` (from /proc)."""
    children = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[1] == str(pid):
                children.append(int(name))
    return sorted(children)


def restore_outcome(ctx, state):
    folder = state.fresh()
    out = os.path.join(folder, "restored.db")
    result = subprocess.run(
        [ctx.cli, "restore", "file://" + os.path.join(folder, "replica"), out, "--key-file",
         os.path.join(folder, "db.key")], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        # Nothing restorable: no generation yet, or (format 2) a generation whose first snapshot never completed,
        # which restore refuses rather than restoring something older. Either is a failure when replicate had
        # already reported its first sync (checked by the caller).
        said = result.stderr.lower()
        if "no snapshot" in said or "empty" in said or "nothing to restore" in said \
                or "has no complete snapshot" in said:
            return None
        return f"restore failed (exit {result.returncode}): {result.stderr.strip()[:300]}"
    connection = open_db(out, ctx.keys["db.key"], engine())
    if connection is None:
        return "the restored database does not open with the key"
    try:
        problems = integrity_problems(connection)
        if problems:
            return "restored: " + "; ".join(problems)
        rows = connection.execute("SELECT id FROM note WHERE id > 100 ORDER BY id").fetchall()
        ids = [r[0] for r in rows]
        if ids != list(range(101, 101 + len(ids))):
            return f"the restored database holds commits {ids}, not a prefix of 101, 102, 103"
        if connection.execute("SELECT count(*) FROM note WHERE id <= 10").fetchone()[0] != 10:
            return "the restored database lost rows of the original"
        return len(ids)
    finally:
        connection.close()


class Restore(Workload):
    name = "restore"
    needs = ("replication",)

    def setup(self, ctx):
        ctx.keygen("db.key")
        ctx.make_db("db.db", "db.key", rows=10, journal="wal")
        replica = os.path.join(ctx.work, "replica")
        os.makedirs(replica)
        process = subprocess.Popen(
            [ctx.cli, "replicate", "db.db", "--key-file", "db.key", "--to", "file://" + replica],
            cwd=ctx.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = process.stderr.readline()
        while line and "replicating" not in line:
            line = process.stderr.readline()
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=120)
        if process.returncode != 0:
            raise RuntimeError("setup: replicate failed")

    def run(self, ctx):
        ctx.run_cli("restore", "file://" + ctx.work + "/replica", "restored.db", "--key-file", "db.key",
                    recorded=True, label="restore")

    def check(self, ctx, state, acked):
        return expect_copy(ctx, state, "restored.db", "db.key", "restore" in acked, ctx.expected["db.db"])


def all_workloads():
    return [
        Keygen(),
        Rotate("copy", "delete"), Rotate("copy", "wal"), Rotate("in-place", "delete"), Rotate("in-place", "wal"),
        Rotate("copy", "delete", databases=3), Rotate("in-place", "wal", databases=2),
        Backup(), Encrypt(), Decrypt(), Migrate(),
        PoolCommits("pool"), PoolCommits("queue", "delete"), PoolCommits("queue", "truncate"),
        PoolCommits("queue", "persist"),
        HandOver(), ShellOutput(), Replicate(), Restore(),
    ]


# ---------------------------------------------------------------------------------------------------------------------
# Exploration


class State:
    def __init__(self, files, scratch_base, trace):
        self.files = files
        self.trace = trace
        self._scratch = Scratch(scratch_base, files)

    def fresh(self):
        return self._scratch.fresh()


def generic_problems(workload, ctx, files):
    problems = []
    key_texts = {text for text in ctx.keys.values()}
    key_texts |= {read_key_text(content) for rel, content in files.items()
                  if content is not None and workload.may_hold_key(rel)}
    needles = set()
    for text in key_texts:
        if text.lower().startswith("x'") and text.endswith("'"):
            digits = text[2:-1]
            needles.add(digits[:64].lower().encode())
            needles.add(digits[:64].upper().encode())
            needles.add(bytes.fromhex(digits[:64]))
    for rel, content in files.items():
        if content is None:
            continue
        if MARKER in content and not workload.may_hold_plaintext(rel):
            problems.append(f"plaintext in {rel}")
        if not workload.may_hold_key(rel):
            for needle in needles:
                if needle and needle in content:
                    problems.append(f"key bytes in {rel}")
                    break
    return problems


def explore(workload, ctx, trace, seed, budget, log):
    seen = {}
    counts = {"explored": 0, "distinct": 0, "impossible": 0, "failing": 0}
    failures = []
    scratch_root = os.path.join(os.path.dirname(ctx.work), "states")
    started = time.monotonic()
    for choice in choices(trace, seed):
        if budget and counts["distinct"] >= budget:
            counts["truncated"] = True
            break
        try:
            files = build_state(trace, choice)
        except Impossible:
            counts["impossible"] += 1
            continue
        counts["explored"] += 1
        acked = frozenset(trace.acks_before(choice.point))
        key = (state_hash(files), acked)
        if key in seen:
            continue
        counts["distinct"] += 1
        shutil.rmtree(scratch_root, ignore_errors=True)
        state = State(files, scratch_root, trace)
        try:
            problems = generic_problems(workload, ctx, files) + workload.check(ctx, state, acked)
        except Exception as error:   # a checker that cannot run is a failure, never a pass
            problems = [f"the checker failed: {error!r}"]
        seen[key] = problems
        if problems:
            counts["failing"] += 1
            failures.append((choice, problems, files))
    shutil.rmtree(scratch_root, ignore_errors=True)
    counts["seconds"] = round(time.monotonic() - started, 1)
    return counts, failures


def run_workload(workload, args, library, log):
    base = tempfile.mkdtemp(prefix=f"powerloss-{workload.name}-")
    work = os.path.realpath(os.path.join(base, "work"))
    os.makedirs(work)
    ctx = Context(work, args.cli, args.writer, library)
    try:
        workload.setup(ctx)
        os.sync()
        initial = snapshot(work)
        open(ctx.trace, "w").close()
        workload.run(ctx)
        records = read_trace(ctx.trace)
        trace = Trace(records, work, initial)
        if hasattr(workload, "after_run"):
            workload.after_run(ctx, trace)
        counts, failures = explore(workload, ctx, trace, args.seed, args.budget, log)
        counts["calls"] = len(trace.ops)
        counts["flushes"] = sum(1 for op in trace.ops if op.is_flush)
        counts["file_flushes"] = sum(1 for op in trace.ops if op.kind == "fsync")
        counts["folder_flushes"] = sum(1 for op in trace.ops if op.kind == "fsyncdir")
        if args.keep and failures:
            keep_failures(workload, trace, failures, args.keep)
        return counts, failures, trace
    finally:
        shutil.rmtree(base, ignore_errors=True)


def snapshot(folder):
    files = {}
    for directory, subfolders, names in os.walk(folder):
        rel_dir = os.path.relpath(directory, folder)
        rel_dir = "" if rel_dir == "." else rel_dir
        if rel_dir:
            files[rel_dir] = None
        for name in names:
            rel = os.path.join(rel_dir, name) if rel_dir else name
            with open(os.path.join(directory, name), "rb") as handle:
                files[rel] = handle.read()
    return files


def keep_failures(workload, trace, failures, folder):
    distinct = {}
    for choice, problems, files in failures:
        distinct.setdefault(tuple(problems), (choice, files))
    for number, (problems, (choice, files)) in enumerate(distinct.items()):
        target = os.path.join(folder, f"{workload.name}-{number}")
        shutil.rmtree(target, ignore_errors=True)
        materialize(files, os.path.join(target, "files"))
        with open(os.path.join(target, "state.json"), "w") as handle:
            json.dump({"workload": workload.name, "state": choice.describe(trace), "problems": list(problems),
                       "trace": [op.describe() for op in trace.ops]}, handle, indent=1)


def available(workload, args):
    if "writer" in workload.needs and not args.writer:
        return "needs POWERLOSS_WRITER (sqlcipherkit-replication-benchmarks built with --traits Services)"
    if "replication" in workload.needs and not args.replication:
        return "needs a CLI built with --traits Replication"
    if "engine4" in workload.needs and engine() != 4:
        return "migrate runs on SQLCipher 4 only"
    return None


def command_run(args):
    library = build_recorder(args.cache)
    args.replication = "replicate" in subprocess.run([args.cli, "--help"], capture_output=True, text=True).stdout
    selected = [w for w in all_workloads() if not args.only or w.name in args.only.split(",")]
    if args.only and len(selected) != len(args.only.split(",")):
        known = ", ".join(w.name for w in all_workloads())
        raise SystemExit(f"power-loss: unknown workload in {args.only}; known: {known}")
    started = time.monotonic()
    rows = []
    failed = 0
    for workload in selected:
        reason = available(workload, args)
        if reason:
            print(f"{workload.name}: skipped ({reason})", flush=True)
            rows.append((workload.name, None, reason))
            continue
        counts, failures, trace = run_workload(workload, args, library, print)
        rows.append((workload.name, counts, None))
        print(f"{workload.name}: {counts['calls']} calls, {counts['flushes']} flushes, {counts['explored']} states"
              f" explored, {counts['distinct']} distinct, {counts['failing']} failing ({counts['impossible']}"
              f" combinations impossible, {counts['seconds']} s)",
              flush=True)
        shown = {}
        for choice, problems, _ in failures:
            shown.setdefault(tuple(problems), (choice, 0))
            shown[tuple(problems)] = (shown[tuple(problems)][0], shown[tuple(problems)][1] + 1)
        for problems, (choice, count) in list(shown.items())[:args.show]:
            print(f"  FAIL ({count} states) {choice.describe(trace)}", flush=True)
            for problem in problems:
                print(f"    - {problem}", flush=True)
        failed += counts["failing"]
    elapsed = time.monotonic() - started
    summary = ["| workload | calls | fsync of a file | fsync of a folder | states explored | distinct states |"
               " failing |",
               "|---|---:|---:|---:|---:|---:|---:|"]
    for name, counts, reason in rows:
        if counts is None:
            summary.append(f"| {name} | skipped: {reason} | | | | | |")
        else:
            summary.append(f"| {name} | {counts['calls']} | {counts['file_flushes']} | {counts['folder_flushes']} |"
                           f" {counts['explored']} | {counts['distinct']} | {counts['failing']} |")
    summary.append(f"\nengine {engine()}, seed {args.seed}, {elapsed:.0f} s")
    text = "\n".join(summary)
    print(text)
    if args.summary:
        with open(args.summary, "w") as handle:
            handle.write(text + "\n")
    total = sum(c["distinct"] for _, c, _ in rows if c)
    print(f"power-loss: {total - failed} passed, {failed} failed")
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------------------------------
# Self-check: the recorder against strace


STRACE_CALLS = ("open,openat,creat,write,pwrite64,writev,pwritev,pwritev2,ftruncate,truncate,fallocate,fsync,"
                "fdatasync,rename,renameat,renameat2,link,linkat,unlink,unlinkat,mkdir,mkdirat,rmdir,"
                "copy_file_range,sendfile")


def command_self_check(args):
    """Runs workloads under strace and the recorder at once: every state-changing call strace saw under the root
    (a write's bytes counted) must be in the trace."""
    if not shutil.which("strace"):
        print("power-loss self-check: strace is not installed; skipped")
        return 0
    library = build_recorder(args.cache)
    args.replication = "replicate" in subprocess.run([args.cli, "--help"], capture_output=True, text=True).stdout
    failures = 0
    for workload in all_workloads():
        if args.only and workload.name not in args.only.split(","):
            continue
        if available(workload, args):
            continue
        base = tempfile.mkdtemp(prefix="powerloss-strace-")
        work = os.path.realpath(os.path.join(base, "work"))
        os.makedirs(work)
        ctx = Context(work, args.cli, args.writer, library)
        strace_log = os.path.join(base, "strace.log")
        try:
            workload.setup(ctx)
            open(ctx.trace, "w").close()
            ctx.extra["traced"] = True
            real_cli, real_writer = ctx.cli, ctx.writer
            wrapper = os.path.join(base, "wrap")
            with open(wrapper, "w") as handle:
                handle.write(f"#!/bin/sh\nexec strace -f -qq -y -X raw -e trace={STRACE_CALLS} -e signal=none "
                             f"-o {strace_log}.$$ \"$@\"\n")
            os.chmod(wrapper, 0o755)
            ctx.cli = os.path.join(base, "cli")
            with open(ctx.cli, "w") as handle:
                handle.write(f"#!/bin/sh\nexec {wrapper} {real_cli} \"$@\"\n")
            os.chmod(ctx.cli, 0o755)
            if real_writer:
                ctx.writer = os.path.join(base, "writer")
                with open(ctx.writer, "w") as handle:
                    handle.write(f"#!/bin/sh\nexec {wrapper} {real_writer} \"$@\"\n")
                os.chmod(ctx.writer, 0o755)
            workload.run(ctx)
            seen = strace_counts(base, work)
            recorded = trace_counts(read_trace(ctx.trace), work)
            missing = {k: v - recorded.get(k, 0) for k, v in seen.items() if v > recorded.get(k, 0)}
            status = "ok: the trace has all of them" if not missing else f"MISSED {missing}"
            shown = ", ".join(f"{count} {category}" for category, count in sorted(seen.items()))
            print(f"{workload.name}: strace saw under the folder {shown}; {status}", flush=True)
            failures += bool(missing)
        finally:
            shutil.rmtree(base, ignore_errors=True)
    return 1 if failures else 0


def strace_counts(base, work):
    import re
    counts = {}
    pattern = re.compile(r'^\d+\s+(\w+)\((.*)\)\s+=\s+(-?\d+)')
    for name in os.listdir(base):
        if not name.startswith("strace.log"):
            continue
        with open(os.path.join(base, name), errors="replace") as handle:
            for line in handle:
                match = pattern.match(line) or re.match(r'^(\w+)\((.*)\)\s+=\s+(-?\d+)', line)
                if not match:
                    continue
                call, arguments, result = match.groups()
                if int(result) < 0 or work not in arguments:
                    continue
                category = strace_category(call, arguments, work)
                if category:
                    counts[category] = counts.get(category, 0) + (int(result) if category == "bytes" else 1)
    return counts


def strace_category(call, arguments, work):
    first = arguments.split(",", 1)[0]
    if call in ("write", "pwrite64", "writev", "pwritev", "pwritev2", "copy_file_range", "sendfile"):
        target = arguments.split(",", 2)[1] if call in ("copy_file_range",) else first
        return "bytes" if work in target and "<" in target else None
    if call in ("fsync", "fdatasync"):
        return "flush" if work in first else None
    if call in ("ftruncate", "truncate"):
        return "truncate"
    if call in ("rename", "renameat", "renameat2"):
        return "rename"
    if call in ("link", "linkat"):
        return "link"
    if call in ("unlink", "unlinkat"):
        return "rmdir" if "AT_REMOVEDIR" in arguments else "unlink"
    if call in ("mkdir", "mkdirat"):
        return "mkdir"
    if call == "rmdir":
        return "rmdir"
    if call in ("open", "openat", "creat") and ("O_CREAT" in arguments or call == "creat"):
        return None   # creation is visible as the create of the model only when new; not compared
    return None


def trace_counts(records, work):
    counts = {}
    for record in records:
        op = record["op"]
        category = {"write": "bytes", "fsync": "flush", "truncate": "truncate", "rename": "rename",
                    "link": "link", "unlink": "unlink", "mkdir": "mkdir", "rmdir": "rmdir"}.get(op)
        if category:
            counts[category] = counts.get(category, 0) + (record["len"] if category == "bytes" else 1)
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("run", "self-check"))
    parser.add_argument("--only", default=os.environ.get("ONLY", ""))
    parser.add_argument("--cli", default=os.environ.get("SQLCIPHERKIT_BIN", ""))
    parser.add_argument("--writer", default=os.environ.get("POWERLOSS_WRITER", ""))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SEED", "35")))
    parser.add_argument("--budget", type=int, default=int(os.environ.get("BUDGET", "0")),
                        help="at most this many distinct states per workload (0: all)")
    parser.add_argument("--summary", default=os.environ.get("SUMMARY", ""))
    parser.add_argument("--keep", default=os.environ.get("KEEP", ""), help="a folder for the failing states")
    parser.add_argument("--show", type=int, default=5, help="distinct failures shown per workload")
    parser.add_argument("--cache", default=os.path.join(REPO, ".build", "power-loss"))
    args = parser.parse_args()
    if not args.cli:
        raise SystemExit("power-loss: set SQLCIPHERKIT_BIN (or --cli) to the sqlcipherkit binary")
    args.cli = os.path.abspath(args.cli)
    if args.writer:
        args.writer = os.path.abspath(args.writer)
    if args.command == "run":
        sys.exit(command_run(args))
    sys.exit(command_self_check(args))


if __name__ == "__main__":
    main()
