#!/usr/bin/env python3
"""clang-tidy over every translation unit the build compiles, with a cache.

Runs clang-tidy (the checks .clang-tidy keeps, warnings as errors) over each
entry of BUILD/compile_commands.json that is a source in this checkout, on
all cores, and exits 1 naming every file with a finding.

A whole-tree run costs about ten seconds of CPU per translation unit, most
of it parsing the same headers again. A unit whose inputs have not changed
since it last came back clean is not run again: its key is a digest of the
clang-tidy version, .clang-tidy, the compile arguments and the path and
bytes of every file the unit includes (as the compiler's -M lists them, so
a header or a NOLINT comment changed anywhere changes the key). Only clean
results are kept; a finding is always reported afresh. Paths are written
relative to the checkout, so a fresh clone reuses what another clone
checked, as ccache does for the objects.

  scripts/tidy.py                 every unit (CI runs this)
  scripts/tidy.py FILE...         only these sources
  scripts/tidy.py --no-cache      run every unit, keep nothing
Options: --build DIR (default build), --jobs N (default: the cores),
--cache DIR (default $KILN_TIDY_CACHE or ~/.cache/kiln-tidy).
Exit: 0 clean, 1 findings, 2 usage or a missing build, 77 no clang-tidy.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SOURCE_SUFFIXES = (".cc", ".cpp", ".cxx")


def fail(msg, code=2):
    print(f"tidy.py: {msg}", file=sys.stderr)
    sys.exit(code)


def entry_args(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def strip_output(args):
    """The compile arguments without the object file they write."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a.startswith("-o") and len(a) > 2:
            continue
        out.append(a)
    return out


def parse_make_deps(text):
    """The prerequisites of the one rule `cc -M` prints."""
    text = text.replace("\\\n", " ")
    _, _, deps = text.partition(":")
    files, cur = [], ""
    i = 0
    while i < len(deps):
        c = deps[i]
        if c == "\\" and i + 1 < len(deps) and deps[i + 1] == " ":
            cur += " "
            i += 2
            continue
        if c.isspace():
            if cur:
                files.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    if cur:
        files.append(cur)
    return files


class Unit:
    def __init__(self, entry, root, build):
        self.entry = entry
        self.directory = entry.get("directory", build)
        self.file = os.path.normpath(os.path.join(self.directory, entry["file"]))
        self.rel = os.path.relpath(self.file, root)
        self.args = strip_output(entry_args(entry))


class Tidy:
    def __init__(self, root, build, db_dir, cache, tidy_bin):
        self.root = root
        self.build = build
        self.db_dir = db_dir
        self.cache = cache
        self.tidy_bin = tidy_bin
        version = subprocess.run([tidy_bin, "--version"], capture_output=True, text=True).stdout
        with open(os.path.join(root, ".clang-tidy"), "rb") as f:
            config = f.read()
        h = hashlib.sha256()
        h.update(version.encode())
        h.update(config)
        self.base = h.digest()
        self.digests = {}
        self.lock = threading.Lock()

    def portable(self, s):
        # The build folder first: it sits inside the checkout.
        return s.replace(self.build, "<build>").replace(self.root, "<src>")

    def key(self, unit):
        """The unit's cache key, or None when its includes cannot be listed."""
        dep_args = unit.args + ["-M"]
        p = subprocess.run(dep_args, cwd=unit.directory, capture_output=True, text=True)
        if p.returncode != 0:
            return None
        h = hashlib.sha256(self.base)
        for a in unit.args[1:]:
            h.update(self.portable(a).encode() + b"\0")
        for dep in sorted(set(parse_make_deps(p.stdout))):
            path = os.path.normpath(os.path.join(unit.directory, dep))
            digest = self.file_digest(path)
            if digest is None:
                return None
            h.update(self.portable(path).encode() + b"\0" + digest)
        return h.hexdigest()

    def file_digest(self, path):
        """sha256 of a file's bytes, read once a run for as long as its size
        and mtime stay (every unit includes the same few hundred headers)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        stamp = (path, st.st_size, st.st_mtime_ns)
        with self.lock:
            if stamp in self.digests:
                return self.digests[stamp]
        try:
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).digest()
        except OSError:
            return None
        with self.lock:
            self.digests[stamp] = digest
        return digest

    def marker(self, key):
        return os.path.join(self.cache, key[:2], key)

    def check(self, unit, use_cache):
        """(verdict, seconds, output): verdict is cached, clean or findings."""
        start = time.monotonic()
        key = self.key(unit) if use_cache else None
        if key and os.path.exists(self.marker(key)):
            return "cached", time.monotonic() - start, ""
        p = subprocess.run(
            [self.tidy_bin, "-p", self.db_dir, "--quiet", "--warnings-as-errors=*", unit.file],
            cwd=self.root, capture_output=True, text=True)
        out = "\n".join(l for l in (p.stdout + p.stderr).splitlines()
                        if l and not l.endswith(" generated.") and not l.startswith("Suppressed "))
        found = p.returncode != 0 or "warning:" in out or "error:" in out
        # A file edited while clang-tidy ran: what came back clean may not be
        # what the key was taken from, so nothing is kept.
        if not found and key and self.key(unit) == key:
            path = self.marker(key)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(unit.rel + "\n")
            os.replace(tmp, path)
        return ("findings" if found else "clean"), time.monotonic() - start, out


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="\n".join(__doc__.split("\n")[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--build", default="build")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cache", default=os.environ.get(
        "KILN_TIDY_CACHE", os.path.expanduser("~/.cache/kiln-tidy")))
    ap.add_argument("--no-cache", action="store_true")
    opts = ap.parse_args()

    tidy_bin = shutil.which("clang-tidy")
    if not tidy_bin:
        fail("clang-tidy is not installed (scripts/setup.sh installs it)", 77)
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                          text=True).stdout.strip()
    if not root:
        fail("not a git checkout: the sources are what git tracks", 77)
    root = os.path.realpath(root)
    os.chdir(root)
    build = os.path.realpath(opts.build)
    db = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(db):
        fail(f"{db} is missing: configure and build {opts.build}/ first (scripts/build.sh)")
    with open(db) as f:
        entries = json.load(f)

    tracked = set(subprocess.run(["git", "ls-files"], capture_output=True, text=True)
                  .stdout.splitlines())
    wanted = {os.path.normpath(x) for x in opts.files}
    # One unit per source: clang-tidy checks a file once for each compile
    # command the database holds for it, and a source built into several
    # targets (tests/test_main.cc is in twenty) would be parsed that often
    # for the same findings. The first command stands for the others.
    units, seen, skipped = [], set(), 0
    for e in entries:
        u = Unit(e, root, build)
        if u.rel not in tracked or not u.rel.endswith(SOURCE_SUFFIXES):
            skipped += 1  # generated sources, CUDA units (nvcc's flags)
            continue
        if u.rel in seen:
            continue
        seen.add(u.rel)
        if wanted and u.rel not in wanted:
            continue
        units.append(u)
    missing = wanted - {u.rel for u in units}
    if missing:
        fail("not a source of this build: " + ", ".join(sorted(missing)))

    db_dir = tempfile.mkdtemp(prefix="kiln-tidy-")
    with open(os.path.join(db_dir, "compile_commands.json"), "w") as f:
        json.dump([u.entry for u in units], f)
    tidy = Tidy(root, build, db_dir, opts.cache, tidy_bin)
    counts = {"cached": 0, "clean": 0, "findings": 0}
    bad = []
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max(1, opts.jobs)) as pool:
        futures = {pool.submit(tidy.check, u, not opts.no_cache): u for u in units}
        for n, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            u = futures[fut]
            verdict, secs, out = fut.result()
            counts[verdict] += 1
            if verdict != "cached":
                print(f"[{n}/{len(units)}] {u.rel}: {verdict} ({secs:.1f} s)", flush=True)
            if verdict == "findings":
                bad.append(u.rel)
                print(out, flush=True)
    shutil.rmtree(db_dir, ignore_errors=True)
    print(f"clang-tidy: {len(units)} units, {counts['clean']} clean, {counts['cached']} "
          f"unchanged since a clean run, {len(bad)} with findings "
          f"({time.monotonic() - start:.0f} s; {skipped} compile commands not ours to check)")
    if bad:
        print("findings in:\n" + "\n".join(f"  {b}" for b in sorted(bad)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
