#!/usr/bin/env python3
"""The crash campaign behind .ci/crash-campaign (read that file for how to run it).

Every kill: the command starts, gets SIGKILL after a delay drawn uniformly from [0, typical duration] (the median of
three uninterrupted runs, process start included), and then the folder is checked with a fresh connection of the
python sqlcipher3 engine (never by trusting an exit status):

- rotate, migrate: the database opens with exactly one of the two keys (migrate: the SQLCipher 3 or the 4 settings),
  passes quick_check, keeps its journal mode, and every row has the same checksum;
- backup, encrypt, decrypt: the source still opens as before, passes quick_check, same checksum; the destination does
  not exist, or it is complete (opens with its key, quick_check, same checksum; encrypted unless decrypt);
- the plaintext marker that every row carries is in no file of the folder, except the plaintext source (encrypt),
  a finished decrypt output, and a killed decrypt's own temporary file (which is its plaintext copy being written;
  counted separately, and checked to be mode 0600);
- temporary files (`*.sqlcipherkit-tmp-*`) the killed run left are counted (and must be mode 0600); after every
  FOLLOWUP_EVERY-th kill a complete run of the same command follows, must succeed, and must leave none.

Keys live in key files made by `sqlcipherkit keygen` (mode 0600) and reach the binary through --key-file only. The
checker reads the key files itself, in process.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time

import sqlcipher3

MARKER = b"SQLCIPHERKIT-CAMPAIGN-MARKER"
TEMP_MARKER = ".sqlcipherkit-tmp-"
SIDE_SUFFIXES = ("", "-wal", "-shm", "-journal")


class CheckFailure(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------------------
# The checker's own connections (python sqlcipher3, SQLCipher 4.x, independent of the binary under test)


def children_of(pid):
    """The processes whose parent is `pid` (from /proc)."""
    children = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            children.append(int(name))
    return children


def wait_for_exit(pids, limit):
    """Waits until every pid has exited (gone, or a zombie waiting for init), at most `limit` seconds."""
    deadline = time.monotonic() + limit
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    state = handle.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                break
            if state in ("Z", "X"):
                break
            time.sleep(0.005)

def read_key(path):
    with open(path, "r") as handle:
        text = handle.read().rstrip("\r\n")
    if not (text.startswith("x'") and text.endswith("'")):
        raise SystemExit(f"{path}: expected a raw key written by sqlcipherkit keygen")
    return text


def connect(path, key, compat):
    """A fresh connection, or None when this key (and these settings) do not open the file. `key` None: plaintext."""
    if not os.path.exists(path):
        raise CheckFailure(f"{path} does not exist")
    connection = sqlcipher3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None)
    try:
        if key is not None:
            connection.execute(f'PRAGMA key = "{key}"')
            if compat == 3:
                connection.execute("PRAGMA cipher_compatibility = 3")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return connection
    except sqlcipher3.DatabaseError as error:
        connection.close()
        if "not a database" in str(error) or "encrypted" in str(error):
            return None
        raise CheckFailure(f"{path}: unexpected error at open: {error}")


def opens(path, key, compat):
    connection = connect(path, key, compat)
    if connection is None:
        return False
    connection.close()
    return True


def fingerprint(path, key, compat):
    """quick_check, cipher_integrity_check, journal mode, row count and a SHA-256 over every row (fresh connection)."""
    connection = connect(path, key, compat)
    if connection is None:
        raise CheckFailure(f"{path}: the key expected to open it does not")
    try:
        check = [row[0] for row in connection.execute("PRAGMA quick_check").fetchall()]
        if check != ["ok"]:
            raise CheckFailure(f"{path}: quick_check: {check[:5]}")
        if key is not None:
            # Every page's HMAC (the checker's engine is SQLCipher 4, which has this PRAGMA for 3- and 4-format files).
            damaged = connection.execute("PRAGMA cipher_integrity_check").fetchall()
            if damaged:
                raise CheckFailure(f"{path}: cipher_integrity_check: {damaged[:5]}")
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0].upper()
        digest = hashlib.sha256()
        count = 0
        for row_id, body in connection.execute("SELECT id, body FROM item ORDER BY id"):
            digest.update(f"{row_id}\t{body}\n".encode())
            count += 1
        return {"journal_mode": mode, "rows": count, "sha256": digest.hexdigest()}
    except sqlcipher3.Error as error:
        raise CheckFailure(f"{path}: {error}")
    finally:
        connection.close()


def file_starts_with_sqlite_header(path):
    with open(path, "rb") as handle:
        return handle.read(16) == b"SQLite format 3\x00"


# ---------------------------------------------------------------------------------------------------------------------
# Folder inspection

def temp_files(folder):
    return sorted(name for name in os.listdir(folder) if TEMP_MARKER in name)


def files_with_marker(folder):
    found = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as handle:
            if MARKER in handle.read():
                found.append(name)
    return found


def mode_of(path):
    return os.stat(path).st_mode & 0o7777


def flip_bit(path, offset):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)[0]
        handle.seek(offset)
        handle.write(bytes([byte ^ 1]))


def delete_row(path, key, compat):
    connection = connect(path, key, compat)
    connection.execute("DELETE FROM item WHERE id = 1234")
    connection.close()


def remove_database(path):
    for suffix in SIDE_SUFFIXES:
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass


# ---------------------------------------------------------------------------------------------------------------------
# Campaign

class Campaign:
    def __init__(self, arguments):
        self.binary = os.path.abspath(arguments.binary)
        self.followup_every = max(1, arguments.followup_every)
        self.random = random.Random(arguments.seed)
        self.seed = arguments.seed
        self.work = arguments.work
        self.failure_root = os.path.join(self.work + "-failures")
        version = subprocess.run([self.binary, "--version"], capture_output=True, text=True, check=True).stdout
        self.version_text = version.strip()
        engine_line = next(line for line in version.splitlines() if line.startswith("engine:"))
        self.engine = engine_line.split("SQLCipher ", 1)[1].split(",")[0]
        self.engine_major = int(self.engine.split(".")[0])
        # Files written by the binary on SQLCipher 3 are in SQLCipher 3's format: the checker opens them so.
        self.compat = 3 if self.engine_major == 3 else 4
        # SQLCipher 4 copies about twice as fast: twice the rows keep its shortest command (decrypt) over 100 ms.
        self.rows = arguments.rows or (40000 if self.engine_major == 3 else 80000)
        checker = sqlcipher3.connect(":memory:")
        # The checker tries both keys on purpose; SQLCipher 4 would log every wrong one ("hmac check failed").
        checker.execute("PRAGMA cipher_log_level = NONE").fetchall()
        self.checker_engine = checker.execute("PRAGMA cipher_version").fetchone()[0]
        checker.close()
        self.results = []

    # -- running the binary

    def command(self, args, folder):
        return [self.binary] + args

    def run_complete(self, args, folder, what):
        completed = subprocess.run(
            [self.binary] + args, cwd=folder, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if completed.returncode != 0:
            raise CheckFailure(
                f"{what}: exit {completed.returncode}: {completed.stderr.strip()[-600:]}")
        return completed

    def run_killed(self, args, folder, delay):
        """Starts the command, kills it after `delay` seconds; True when it was killed, False when it had finished."""
        stderr_path = os.path.join(self.work, "last-killed-stderr.txt")
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen(
                [self.binary] + args, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
            time.sleep(delay)
            # The command's guardian (a child that removes its temporary files when it dies) is left alone: the
            # check below runs once it has done its work, so what is left is what a SIGKILL really leaves.
            guardians = children_of(process.pid)
            try:
                os.kill(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            status = process.wait()
            wait_for_exit(guardians, limit=30)
        if status == -signal.SIGKILL:
            return True
        if status != 0:
            with open(stderr_path, "r", errors="replace") as handle:
                message = handle.read().strip()[-600:]
            raise CheckFailure(f"the run finished before the kill with exit {status}: {message}")
        return False

    def keygen(self, folder, name):
        self.run_complete(["keygen", "--out", name], folder, "keygen")
        path = os.path.join(folder, name)
        if mode_of(path) != 0o600:
            raise SystemExit(f"{path}: mode {oct(mode_of(path))}, expected 0600")
        return path

    def create_database(self, folder, name, journal_mode, key_file=None, cipher_args=()):
        sql = (f"PRAGMA journal_mode = {journal_mode};"
               " CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT NOT NULL);"
               f" WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {self.rows})"
               " INSERT INTO item(id, body) SELECT i,"
               f" '{MARKER.decode()} ' || printf('%08d', i) || ' ' || hex(randomblob(40)) FROM n;")
        key_args = ["--key-file", key_file] if key_file else ["--plaintext"]
        self.run_complete(["exec", name] + key_args + list(cipher_args) + ["--create", sql], folder, "create")
        return os.path.join(folder, name)

    # -- the checker must see damage: a negative control before the campaign

    def self_test(self):
        folder = os.path.join(self.work, "self-test")
        os.makedirs(folder)
        key = read_key(self.keygen(folder, "a.key"))
        other = read_key(self.keygen(folder, "b.key"))
        saved_rows, self.rows = self.rows, 3000
        try:
            good = self.create_database(folder, "good.db", "DELETE", key_file="a.key")
        finally:
            self.rows = saved_rows
        expected = fingerprint(good, key, self.compat)
        if not opens(good, key, self.compat) or opens(good, other, self.compat) or opens(good, None, self.compat):
            raise SystemExit("self-test: the checker does not tell the right key from a wrong one")
        size = os.path.getsize(good)
        damages = {
            "a flipped bit": lambda path: flip_bit(path, size // 2),
            "a lost last page": lambda path: os.truncate(path, size - 1024),
            "a deleted row": lambda path: delete_row(path, key, self.compat),
        }
        for what, damage in damages.items():
            path = os.path.join(folder, "damaged.db")
            shutil.copy2(good, path)
            damage(path)
            try:
                detected = fingerprint(path, key, self.compat) != expected
            except CheckFailure:
                detected = True
            if not detected:
                raise SystemExit(f"self-test: the checker did not see {what}")
            remove_database(path)
        with open(os.path.join(folder, "stray"), "wb") as handle:
            handle.write(b"..." + MARKER + b"...")
        if files_with_marker(folder) != ["stray"]:
            raise SystemExit("self-test: the plaintext scan is wrong")
        shutil.rmtree(folder)
        print("self-test: the checker tells the keys apart and sees a flipped bit, a lost page, a deleted row and"
              " a plaintext marker", flush=True)

    # -- one combination

    def run_combination(self, scenario, kills):
        name = scenario_name(scenario)
        folder = os.path.join(self.work, name)
        os.makedirs(folder)
        result = {
            "command": scenario.command, "mode": scenario.mode, "kills": 0, "planned": kills, "outcomes": {},
            "failures": [], "killsLeavingTemp": 0, "tempFilesAfterKills": 0, "maxTempFilesAfterKill": 0,
            "followups": 0, "tempFilesAfterFollowups": 0, "decryptTempWithPlaintext": 0,
            "sourceBytesChanged": 0, "tempKinds": {}, "typicalMs": None, "wallSeconds": None,
        }
        self.results.append(result)
        started = time.monotonic()
        try:
            scenario.setup(self, folder)
            durations = []
            for _ in range(3):
                scenario.before_run(self, folder)
                begin = time.monotonic()
                self.run_complete(scenario.args(self, folder), folder, "timing run")
                durations.append(time.monotonic() - begin)
                scenario.check_after_complete_run(self, folder)
                scenario.after_complete_run(self, folder)
            typical = statistics.median(durations)
            result["typicalMs"] = round(typical * 1000)
            print(f"  {name}: typical run {result['typicalMs']} ms, {kills} kills", flush=True)
            for iteration in range(kills):
                delay = self.random.uniform(0, typical)
                scenario.before_run(self, folder)
                args = scenario.args(self, folder)
                try:
                    killed = self.run_killed(args, folder, delay)
                    outcome = scenario.check_after_kill(self, folder, killed)
                    leftovers = temp_files(folder)
                    for leftover in leftovers:
                        if mode_of(os.path.join(folder, leftover)) != 0o600:
                            raise CheckFailure(
                                f"{leftover}: mode {oct(mode_of(os.path.join(folder, leftover)))}, expected 0600")
                    self.check_plaintext(scenario, folder, result)
                    result["kills"] += 1
                    result["outcomes"][outcome] = result["outcomes"].get(outcome, 0) + 1
                    for leftover in leftovers:
                        kind = next((k for k in ("-journal", "-wal", "-shm") if leftover.endswith(k)), "copy")
                        result["tempKinds"][kind] = result["tempKinds"].get(kind, 0) + 1
                    if leftovers:
                        result["killsLeavingTemp"] += 1
                        result["tempFilesAfterKills"] += len(leftovers)
                        result["maxTempFilesAfterKill"] = max(result["maxTempFilesAfterKill"], len(leftovers))
                    if (iteration + 1) % self.followup_every == 0 or iteration == kills - 1:
                        scenario.before_run(self, folder)
                        self.run_complete(scenario.args(self, folder), folder, "the complete run after a kill")
                        scenario.check_after_complete_run(self, folder)
                        remaining = temp_files(folder)
                        result["followups"] += 1
                        result["tempFilesAfterFollowups"] += len(remaining)
                        if remaining:
                            raise CheckFailure(f"temporary files remain after a complete run: {remaining}")
                        scenario.after_complete_run(self, folder)
                except CheckFailure as failure:
                    self.record_failure(result, name, folder, iteration, delay, args, str(failure))
                    break
        except CheckFailure as failure:
            self.record_failure(result, name, folder, -1, 0.0, [], str(failure))
        result["wallSeconds"] = round(time.monotonic() - started, 1)
        summary = ", ".join(f"{count} {outcome}" for outcome, count in sorted(result["outcomes"].items()))
        print(f"  {name}: {result['kills']} kills ({summary}); failures {len(result['failures'])};"
              f" temp files after kills {result['tempFilesAfterKills']} (in {result['killsLeavingTemp']} kills),"
              f" after {result['followups']} complete runs {result['tempFilesAfterFollowups']};"
              f" {result['wallSeconds']} s", flush=True)

    def check_plaintext(self, scenario, folder, result):
        for name in files_with_marker(folder):
            verdict = scenario.plaintext_allowed(self, folder, name)
            if verdict == "decrypt-temp":
                if mode_of(os.path.join(folder, name)) != 0o600:
                    raise CheckFailure(f"{name} holds plaintext with mode {oct(mode_of(os.path.join(folder, name)))}")
                result["decryptTempWithPlaintext"] += 1
            elif not verdict:
                raise CheckFailure(f"plaintext marker found in {name}")

    def record_failure(self, result, name, folder, iteration, delay, args, message):
        snapshot = os.path.join(self.failure_root, f"{name}-{iteration}")
        os.makedirs(self.failure_root, exist_ok=True)
        shutil.copytree(folder, snapshot)
        listing = {entry: os.path.getsize(os.path.join(folder, entry)) for entry in sorted(os.listdir(folder))}
        failure = {"iteration": iteration, "delayMs": round(delay * 1000, 1), "command": " ".join(args),
                   "message": message, "files": listing, "snapshot": snapshot}
        result["failures"].append(failure)
        print(f"  FAILURE {name} kill {iteration}: {json.dumps(failure)}", flush=True)


# ---------------------------------------------------------------------------------------------------------------------
# Scenarios: how to set up, what to run, what must hold after a kill and after a complete run

class Rotate:
    command = "rotate"

    def __init__(self, method, mode):
        self.method, self.mode = method, mode
        self.command = f"rotate --method {method}"

    def setup(self, campaign, folder):
        self.keys = [campaign.keygen(folder, "a.key"), campaign.keygen(folder, "b.key")]
        self.db = campaign.create_database(folder, "crash.db", self.mode, key_file="a.key")
        self.expected = fingerprint(self.db, read_key(self.keys[0]), campaign.compat)
        if self.expected["journal_mode"] != self.mode:
            raise CheckFailure(f"the database was created in {self.expected['journal_mode']} mode")

    def before_run(self, campaign, folder):
        pass

    def args(self, campaign, folder):
        return ["rotate", "crash.db", "--key-file", os.path.basename(self.keys[0]),
                "--new-key-file", os.path.basename(self.keys[1]), "--method", self.method]

    def key_state(self, campaign):
        old = opens(self.db, read_key(self.keys[0]), campaign.compat)
        new = opens(self.db, read_key(self.keys[1]), campaign.compat)
        if old == new:
            raise CheckFailure(f"the database opens with {'both keys' if old else 'neither key'}")
        return "new" if new else "old"

    def check_after_kill(self, campaign, folder, killed):
        state = self.key_state(campaign)
        if state == "new":
            self.keys.reverse()
        if fingerprint(self.db, read_key(self.keys[0]), campaign.compat) != self.expected:
            raise CheckFailure("rows, checksum or journal mode differ after the kill")
        if not killed and state != "new":
            raise CheckFailure("the run finished with exit 0 but the new key does not open the database")
        return f"{'killed' if killed else 'finished'}, {state} key"

    def check_after_complete_run(self, campaign, folder):
        if self.key_state(campaign) != "new":
            raise CheckFailure("a complete rotation left the old key")
        self.keys.reverse()
        if fingerprint(self.db, read_key(self.keys[0]), campaign.compat) != self.expected:
            raise CheckFailure("rows, checksum or journal mode differ after a complete rotation")

    def after_complete_run(self, campaign, folder):
        pass

    def plaintext_allowed(self, campaign, folder, name):
        return False


class Copy:
    """backup, encrypt, decrypt: a source that must stay intact, a destination that is absent or complete."""

    def __init__(self, command, mode):
        self.command, self.mode = command, mode

    def setup(self, campaign, folder):
        campaign.keygen(folder, "a.key")
        campaign.keygen(folder, "b.key")
        source_key = None if self.command == "encrypt" else "a.key"
        self.source = campaign.create_database(folder, "source.db", self.mode, key_file=source_key)
        self.source_key = read_key(os.path.join(folder, source_key)) if source_key else None
        self.dest = os.path.join(folder, "dest.db")
        self.dest_key = {"backup": read_key(os.path.join(folder, "b.key")),
                         "encrypt": read_key(os.path.join(folder, "b.key")), "decrypt": None}[self.command]
        self.expected = fingerprint(self.source, self.source_key, campaign.compat)
        self.source_bytes = self.source_digest()

    def source_digest(self):
        with open(self.source, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()

    def before_run(self, campaign, folder):
        # Each run writes a new destination; the leftovers of killed runs stay for the next run to clean.
        remove_database(self.dest)

    def args(self, campaign, folder):
        if self.command == "backup":
            return ["backup", "source.db", "dest.db", "--key-file", "a.key", "--dest-key-file", "b.key"]
        if self.command == "encrypt":
            return ["encrypt", "source.db", "dest.db", "--new-key-file", "b.key"]
        return ["decrypt", "source.db", "dest.db", "--key-file", "a.key", "--allow-plaintext"]

    def check_source(self, campaign):
        if self.source_key is not None and opens(self.source, None, campaign.compat):
            raise CheckFailure("the encrypted source opens without a key")
        if fingerprint(self.source, self.source_key, campaign.compat) != self.expected:
            raise CheckFailure("the source's rows, checksum or journal mode changed")

    def check_destination(self, campaign):
        if not os.path.exists(self.dest):
            for suffix in SIDE_SUFFIXES[1:]:
                if os.path.exists(self.dest + suffix):
                    raise CheckFailure(f"dest.db is absent but dest.db{suffix} exists")
            return False
        if mode_of(self.dest) != 0o600:
            raise CheckFailure(f"dest.db has mode {oct(mode_of(self.dest))}")
        if self.dest_key is not None:
            if file_starts_with_sqlite_header(self.dest) or opens(self.dest, None, campaign.compat):
                raise CheckFailure("dest.db should be encrypted but is plaintext")
        elif not file_starts_with_sqlite_header(self.dest):
            raise CheckFailure("the decrypt output has no SQLite header")
        got = fingerprint(self.dest, self.dest_key, campaign.compat)
        if (got["rows"], got["sha256"]) != (self.expected["rows"], self.expected["sha256"]):
            raise CheckFailure(f"dest.db exists but is not a complete copy: {got['rows']} rows")
        return True

    def check_after_kill(self, campaign, folder, killed):
        self.check_source(campaign)
        exists = self.check_destination(campaign)
        if self.source_digest() != self.source_bytes:
            self.source_bytes = self.source_digest()
            campaign.results[-1]["sourceBytesChanged"] += 1
        if not killed and not exists:
            raise CheckFailure("the run finished with exit 0 but wrote no destination")
        if not killed:
            return "finished"
        return "killed, destination complete" if exists else "killed, no destination"

    def check_after_complete_run(self, campaign, folder):
        self.check_source(campaign)
        if not self.check_destination(campaign):
            raise CheckFailure("a complete run wrote no destination")

    def after_complete_run(self, campaign, folder):
        pass

    def plaintext_allowed(self, campaign, folder, name):
        if self.command == "encrypt" and name in ["source.db" + suffix for suffix in SIDE_SUFFIXES]:
            return True
        if self.command == "decrypt":
            if name in ["dest.db" + suffix for suffix in SIDE_SUFFIXES] and os.path.exists(self.dest):
                return True
            if name.startswith("dest.db" + TEMP_MARKER):
                return "decrypt-temp"
        return False


class Migrate:
    """SQLCipher 3 format -> 4 format, same key (SQLCipher 4 only). A fresh SQLCipher 3 file before every run."""

    command = "migrate"

    def __init__(self, mode):
        self.mode = mode

    def setup(self, campaign, folder):
        self.key_file = campaign.keygen(folder, "a.key")
        self.key = read_key(self.key_file)
        pristine_folder = folder + "-pristine"
        os.makedirs(pristine_folder)
        shutil.copy2(self.key_file, os.path.join(pristine_folder, "a.key"))
        self.pristine = campaign.create_database(
            pristine_folder, "v3.db", self.mode, key_file="a.key", cipher_args=["--cipher-compatibility", "3"])
        if opens(self.pristine, self.key, 4) or not opens(self.pristine, self.key, 3):
            raise CheckFailure("the pristine database is not in SQLCipher 3's format")
        self.expected = fingerprint(self.pristine, self.key, 3)
        self.db = os.path.join(folder, "crash.db")
        self.reset()

    def reset(self):
        remove_database(self.db)
        shutil.copy2(self.pristine, self.db)

    def state(self):
        v3, v4 = opens(self.db, self.key, 3), opens(self.db, self.key, 4)
        if v3 == v4:
            raise CheckFailure(f"the database opens with {'both' if v3 else 'neither'} the 3 and the 4 settings")
        return 4 if v4 else 3

    def before_run(self, campaign, folder):
        if self.state() == 4:
            self.reset()

    def args(self, campaign, folder):
        return ["migrate", "crash.db", "--key-file", "a.key"]

    def check_after_kill(self, campaign, folder, killed):
        state = self.state()
        if fingerprint(self.db, self.key, state) != self.expected:
            raise CheckFailure("rows, checksum or journal mode differ after the kill")
        if not killed and state != 4:
            raise CheckFailure("the run finished with exit 0 but the file is still in the 3 format")
        return f"{'killed' if killed else 'finished'}, {state} format"

    def check_after_complete_run(self, campaign, folder):
        if self.state() != 4:
            raise CheckFailure("a complete migration left the 3 format")
        if fingerprint(self.db, self.key, 4) != self.expected:
            raise CheckFailure("rows, checksum or journal mode differ after a complete migration")

    def after_complete_run(self, campaign, folder):
        self.reset()

    def plaintext_allowed(self, campaign, folder, name):
        return False


# ---------------------------------------------------------------------------------------------------------------------

def scenario_name(scenario):
    return f"{scenario.command.replace(' --method ', '-')}-{scenario.mode}".lower()


def markdown_summary(campaign, total_seconds, kills_requested):
    lines = [
        f"Crash campaign, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"- binary: `{campaign.binary}`",
        f"- engine under test: SQLCipher {campaign.engine} ({campaign.version_text.splitlines()[1].strip()})",
        f"- checker: python sqlcipher3, SQLCipher {campaign.checker_engine}"
        f" (files opened with cipher_compatibility {campaign.compat})",
        f"- kills requested {kills_requested}, done {sum(r['kills'] for r in campaign.results)};"
        f" rows per database {campaign.rows}; seed {campaign.seed}; a complete run after every"
        f" {campaign.followup_every}. kill",
        f"- total wall time {total_seconds:.0f} s",
        "",
        "| Command | Journal | Typical run | Kills | Outcomes | Failures | Temp files after kills (kills leaving any)"
        " | Temp files after the next complete run | Wall time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in campaign.results:
        outcomes = ", ".join(f"{count} {outcome}" for outcome, count in sorted(r["outcomes"].items()))
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(r["tempKinds"].items()))
        extra = f": {kinds}" if kinds else ""
        if r["decryptTempWithPlaintext"]:
            extra += f" ({r['decryptTempWithPlaintext']} of them the decrypt's own plaintext copy, mode 0600)"
        lines.append(
            f"| `{r['command']}` | {r['mode']} | {r['typicalMs']} ms | {r['kills']} | {outcomes} | {len(r['failures'])}"
            f" | {r['tempFilesAfterKills']} ({r['killsLeavingTemp']}){extra}"
            f" | {r['tempFilesAfterFollowups']} after {r['followups']} runs | {r['wallSeconds']} s |")
    failures = [(r, f) for r in campaign.results for f in r["failures"]]
    lines.append("")
    lines.append(f"Failures: {len(failures)}")
    for r, f in failures:
        lines.append(f"- {r['command']} {r['mode']}, kill {f['iteration']} after {f['delayMs']} ms: {f['message']}"
                     f" (command `{f['command']}`; files {f['files']}; snapshot {f['snapshot']})")
    changed = sum(r["sourceBytesChanged"] for r in campaign.results)
    lines.append(f"Source files whose bytes changed (contents still checked equal): {changed}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description="SIGKILL campaign for sqlcipherkit (see .ci/crash-campaign)")
    parser.add_argument("--binary", required=True)
    parser.add_argument("--kills", type=int, default=int(os.environ.get("KILLS", "1000")))
    parser.add_argument("--rows", type=int, default=int(os.environ.get("ROWS", "0")),
                        help="rows per database; default 40000 on SQLCipher 3, 80000 on SQLCipher 4")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SEED", str(random.randrange(1, 2**31)))))
    parser.add_argument("--followup-every", type=int, default=int(os.environ.get("FOLLOWUP_EVERY", "2")))
    parser.add_argument("--only", default=os.environ.get("ONLY", ""),
                        help="comma-separated combination names, e.g. rotate-copy-wal,backup-delete")
    parser.add_argument("--summary", default=os.environ.get("SUMMARY", ""))
    arguments = parser.parse_args()
    base = os.environ.get("TMPDIR", "/tmp")
    arguments.work = os.path.join(base, f"crash-campaign-{os.getpid()}")
    os.makedirs(arguments.work)

    campaign = Campaign(arguments)
    scenarios = [Rotate("copy", "WAL"), Rotate("copy", "DELETE"), Rotate("in-place", "WAL"),
                 Rotate("in-place", "DELETE")]
    for command in ("backup", "encrypt", "decrypt"):
        scenarios += [Copy(command, "WAL"), Copy(command, "DELETE")]
    if campaign.engine_major >= 4:
        scenarios += [Migrate("WAL"), Migrate("DELETE")]
    if arguments.only:
        wanted = set(arguments.only.split(","))
        scenarios = [s for s in scenarios if scenario_name(s) in wanted]
    share, extra = divmod(arguments.kills, len(scenarios))
    print(f"crash campaign: SQLCipher {campaign.engine}, {arguments.kills} kills over {len(scenarios)} combinations,"
          f" seed {arguments.seed}, work folder {arguments.work}", flush=True)
    campaign.self_test()
    started = time.monotonic()
    for index, scenario in enumerate(scenarios):
        campaign.run_combination(scenario, share + (1 if index < extra else 0))
    total = time.monotonic() - started

    text = markdown_summary(campaign, total, arguments.kills)
    print()
    print(text)
    default_summary = f"crash-campaign-summary-sqlcipher{campaign.engine.split()[0]}.md"
    summary_path = arguments.summary or os.path.join(base, default_summary)
    with open(summary_path, "w") as handle:
        handle.write(text)
    with open(os.path.splitext(summary_path)[0] + ".json", "w") as handle:
        json.dump({"engine": campaign.engine, "checker": campaign.checker_engine, "seed": arguments.seed,
                   "rows": arguments.rows, "totalSeconds": round(total, 1), "results": campaign.results}, handle,
                  indent=1)
    print(f"summary written to {summary_path}")
    failed = any(r["failures"] for r in campaign.results)
    if not failed and os.environ.get("KEEP") != "1":
        shutil.rmtree(arguments.work)
    else:
        print(f"work folder kept: {arguments.work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
