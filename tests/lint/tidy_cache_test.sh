#!/usr/bin/env bash
# scripts/tidy.py's cache must never hide a finding: a unit is skipped only
# when nothing it includes has changed since it came back clean. Checked on
# a two-file checkout of its own with one cheap check (modernize-use-nullptr),
# so the real tree's ten seconds a unit are not spent here.
set -euo pipefail
tidy_py="$(cd "$(dirname "$0")/../.." && pwd)/scripts/tidy.py"
command -v clang-tidy >/dev/null || { echo "SKIP: clang-tidy is not installed"; exit 77; }
command -v c++ >/dev/null || { echo "SKIP: no C++ compiler"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; echo "--- last output:"; cat "$work/out" 2>/dev/null; exit 1; }

# A checkout at $1 with a header, a source and the compile database a build
# folder would hold.
make_checkout() {
  local repo=$1
  mkdir -p "$repo/lib" "$repo/build"
  printf '%s\n' "Checks: '-*,modernize-use-nullptr'" "WarningsAsErrors: '*'" \
    "HeaderFilterRegex: 'lib/'" > "$repo/.clang-tidy"
  printf '%s\n' '#pragma once' 'inline int* none() { return nullptr; }' > "$repo/lib/x.h"
  printf '%s\n' '#include "lib/x.h"' 'int* first() { return none(); }' > "$repo/lib/a.cc"
  printf '[{"directory": "%s/build", "file": "%s/lib/a.cc", "command": "c++ -std=c++20 -I%s -c %s/lib/a.cc -o a.o"}]\n' \
    "$repo" "$repo" "$repo" "$repo" > "$repo/build/compile_commands.json"
  git -C "$repo" init -q && git -C "$repo" add .clang-tidy lib
}

# run DIR EXPECTED_RC: tidy.py in checkout DIR with the shared cache.
run() {
  local rc=0
  (cd "$1" && "$tidy_py" --jobs 1 --cache "$work/cache") > "$work/out" 2>&1 || rc=$?
  [ "$rc" = "$2" ] || fail "tidy.py in $1 exited $rc, expected $2"
}
expect() { grep -qF -- "$1" "$work/out" || fail "output lacks: $1"; }

make_checkout "$work/one"
run "$work/one" 0
expect "1 clean, 0 unchanged since a clean run, 0 with findings"
[ "$(find "$work/cache" -type f | wc -l)" = 1 ] || fail "a clean unit left no cache entry"

run "$work/one" 0
expect "0 clean, 1 unchanged since a clean run"

# A finding in the header (not the source clang-tidy was given) is found,
# named, and not cached: it is reported on every run.
sed -i 's/return nullptr;/return 0;/' "$work/one/lib/x.h"
run "$work/one" 1
expect "lib/x.h:2:"
expect "[modernize-use-nullptr"
expect "findings in:"
run "$work/one" 1
expect "1 with findings"
[ "$(find "$work/cache" -type f | wc -l)" = 1 ] || fail "a unit with findings was cached"

# A comment is an input too: NOLINT silences the finding, and the new key is
# a fresh clean run, not the old entry.
sed -i 's/return 0; }/return 0; }  \/\/ NOLINT(modernize-use-nullptr)/' "$work/one/lib/x.h"
run "$work/one" 0
expect "1 clean, 0 unchanged since a clean run"

# Back to the first text: its key is the first run's, so it is not run again.
sed -i 's/return 0; }.*/return nullptr; }/' "$work/one/lib/x.h"
run "$work/one" 0
expect "0 clean, 1 unchanged since a clean run"

# A clone elsewhere with the same bytes reuses the cache (paths are keyed
# relative to the checkout) ...
make_checkout "$work/two"
run "$work/two" 0
expect "0 clean, 1 unchanged since a clean run"

# ... and a change to .clang-tidy's checks runs every unit again.
sed -i "s/modernize-use-nullptr'/modernize-use-nullptr,bugprone-macro-parentheses'/" "$work/two/.clang-tidy"
run "$work/two" 0
expect "1 clean, 0 unchanged since a clean run"

# A compile flag is an input: a define that picks what the header says.
printf '%s\n' '#pragma once' '#ifdef OLD_STYLE' 'inline int* none() { return 0; }' '#else' \
  'inline int* none() { return nullptr; }' '#endif' > "$work/two/lib/x.h"
run "$work/two" 0
sed -i 's/-std=c++20/-std=c++20 -DOLD_STYLE/' "$work/two/build/compile_commands.json"
run "$work/two" 1
expect "[modernize-use-nullptr"

# No build folder: a usage error that says what to do, not a pass.
rm -rf "$work/two/build"
run "$work/two" 2
expect "compile_commands.json is missing"
echo "PASS: tidy.py caches clean units only, keyed on every input"
