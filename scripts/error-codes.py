#!/usr/bin/env python3
"""The error codes kiln's sources raise, and docs/errors.md that lists them.

  scripts/error-codes.py            print docs/errors.md as the sources give it
  scripts/error-codes.py --write    rewrite docs/errors.md
  scripts/error-codes.py --check    exit 1 naming each code raised but not
                                    listed, listed but no longer raised, or
                                    not spelled "<area>.<name>"

A code is found where it is written: the second argument of make_error (a
literal, or either side of a ?: of literals), or the code argument of a
helper whose body is `return make_error("<domain>", <that argument>, ...)`.
make_error gives a bare name its domain as the area (provisioner/core/result.h),
so a code built at run time keeps the form without being listed here."""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = ["firmware", "network", "images", "pipelines", "provisioner", "bench"]
DOC = os.path.join(ROOT, "docs", "errors.md")
FORM = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")

STRING = r'"(?:[^"\\]|\\.)*"'
MAKE = re.compile(r'make_error\(\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*(?=(.{0,200}))', re.S)
TERNARY = re.compile(r'make_error\(\s*"([^"]+)"\s*,\s*[^,;?]*\?\s*"([^"]+)"\s*:\s*"([^"]+)"\s*,\s*(?=(.{0,200}))', re.S)
HELPER_DEF = re.compile(r'Error\s+(\w+|operator\(\))\s*\(([^)]*)\)\s*(?:const\s*)?\{[^{}]{0,400}?make_error\(\s*"([^"]*)"\s*,'
                        r'\s*(?:std::move\()?(\w+)', re.S)


def first_text(rest):
    """The message argument as a reader sees it: its literal parts, "..."
    where a value goes (an fmt::format string keeps its text)."""
    depth, i, end, cuts = 0, 0, len(rest), []
    while i < len(rest):
        ch = rest[i]
        if ch == '"':
            j = i + 1
            while j < len(rest) and rest[j] != '"':
                j += 2 if rest[j] == "\\" else 1
            i = j + 1
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                end = i
                break
            depth -= 1
        elif depth == 0 and ch == ",":
            end = i
            break
        elif depth == 0 and ch == "+":
            cuts.append(i)
        i += 1
    pieces, last = [], 0
    for c in cuts + [end]:
        pieces.append(rest[last:c].strip())
        last = c + 1
    text = ""
    for piece in pieces:
        lits = re.findall(STRING, piece)
        if piece.startswith("fmt::format(") and lits:
            text += lits[0][1:-1].replace("{}", "...")
        elif lits and piece.startswith('"'):
            text += "".join(l[1:-1] for l in lits)
        elif lits and piece.startswith("std::string("):
            text += lits[0][1:-1]
        else:
            text += "..."
    text = re.sub(r"(\.\.\.)+", "...", text.replace('\\"', '"')).strip()
    text = re.sub(r"\{[^{}]*\}", "...", text)
    return "" if text == "..." else text.replace("|", "\\|")


def sources():
    for d in DIRS:
        for dp, _, fn in os.walk(os.path.join(ROOT, d)):
            for f in sorted(fn):
                if f.endswith((".cc", ".h", ".cu")):
                    yield os.path.join(dp, f)


def raised():
    """code -> {(file, message text)}"""
    found = defaultdict(set)
    for path in sources():
        s = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, ROOT)
        for m in MAKE.finditer(s):
            if m.group(2):
                found[m.group(2)].add((rel, first_text(m.group(3))))
        for m in TERNARY.finditer(s):
            for g in (2, 3):
                found[m.group(g)].add((rel, first_text(m.group(4))))
        for m in HELPER_DEF.finditer(s):
            name, params, codevar = m.group(1), m.group(2), m.group(4)
            ps = [p.strip() for p in params.split(",")]
            idx = next((i for i, p in enumerate(ps) if re.search(r"\b" + codevar + r'(\s*=\s*"[^"]*")?$', p)), None)
            if idx is None:
                continue
            # A default code ("code = "libvirt.error"") is raised too.
            default = re.search(r'=\s*"([^"]+)"$', ps[idx])
            if default:
                found[default.group(1)].add((rel, ""))
            # A callable error builder is called by its variable: err("...").
            if name == "operator()":
                name = "err"
            pre = r'(?:[^,()"]+|"[^"]*"|\([^()]*\))+\s*,\s*' * idx
            call = re.compile(r"\b" + name + r"\(\s*" + pre + r'"([^"]*)"\s*(?:,\s*(?=(.{0,200})))?', re.S)
            for c in call.finditer(s):
                if c.group(1):
                    found[c.group(1)].add((rel, first_text(c.group(2) or "")))
            either = re.compile(r"\b" + name + r"\(\s*" + pre + r'[^,;?"]*\?\s*"([^"]+)"\s*:\s*"([^"]+)"', re.S)
            for c in either.finditer(s):
                for g in (1, 2):
                    found[c.group(g)].add((rel, ""))
    return found


def markdown(found):
    by_area = defaultdict(list)
    for code in sorted(found):
        by_area[code.split(".")[0]].append(code)
    out = ["# Error codes", "",
           "Every error kiln reports carries a code, `<area>.<name>`, beside its",
           "message: in `--json` output (`\"code\"`), in the journal's stage errors and",
           "in the report. Scripts should match the code, never the message. The",
           "area is the part of kiln that raised it (a stage, the journal, a",
           "transport); a code read from elsewhere keeps its own (`http.*` inside a",
           "firmware error is the HTTP client's). The message says what failed and",
           "where: the file, line and key for config errors, the node, device or",
           "URL for the rest; no message holds a secret.", "",
           "This page is generated from the sources by `scripts/error-codes.py",
           "--write`, and a test fails when a code is raised but not listed here.",
           "\"Where\" is the source file that raises it; \"says\" is the start of its",
           "message (`...` where a value goes).", ""]
    for area in sorted(by_area):
        out += [f"## {area}", "", "| code | where | says |", "|---|---|---|"]
        for code in by_area[area]:
            sites = sorted(found[code])
            files = sorted({f for f, _ in sites})
            texts = [t for _, t in sites if t]
            where = ", ".join(f"`{f}`" for f in files[:3]) + (f" (+{len(files) - 3})" if len(files) > 3 else "")
            says = max(texts, key=lambda t: len(t.replace("...", ""))) if texts else ""
            if len(says) > 90:
                says = says[:87].rstrip() + "..."
            out.append(f"| `{code}` | {where} | {says} |")
        out.append("")
    return "\n".join(out)


def main():
    found = raised()
    bad_form = sorted(c for c in found if not FORM.match(c))
    if "--check" in sys.argv:
        listed = set(re.findall(r"^\| `([^`]+)` \|", open(DOC, encoding="utf-8").read(), re.M)) \
            if os.path.exists(DOC) else set()
        missing = sorted(set(found) - listed)
        gone = sorted(listed - set(found))
        for c in bad_form:
            print(f"not spelled <area>.<name>: {c} ({', '.join(sorted({f for f, _ in found[c]}))})")
        for c in missing:
            print(f"raised but not in docs/errors.md: {c} ({', '.join(sorted({f for f, _ in found[c]}))})")
        for c in gone:
            print(f"in docs/errors.md but raised nowhere: {c}")
        if bad_form or missing or gone:
            print("run scripts/error-codes.py --write after fixing the spelling", file=sys.stderr)
            return 1
        print(f"{len(found)} error codes, each spelled <area>.<name> and listed in docs/errors.md")
        return 0
    text = markdown(found)
    if "--write" in sys.argv:
        open(DOC, "w", encoding="utf-8").write(text)
    else:
        print(text)
    return 1 if bad_form else 0


if __name__ == "__main__":
    sys.exit(main())
