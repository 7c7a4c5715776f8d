#!/usr/bin/env bash
# Lint the tree: every C++ and CUDA source formatted as .clang-format says,
# and every error code spelled "<area>.<name>" and listed in docs/errors.md
# (scripts/error-codes.py). ctest runs both (tests "source_format" and
# "error_codes_documented"), so the README's test command and CI do.
#   scripts/lint.sh            check; exit 1 naming what is off
#   scripts/lint.sh --fix      reformat in place and rewrite docs/errors.md
#   scripts/lint.sh --tidy     also clang-tidy (.clang-tidy's checks, as
#                              errors) over the sources changed since
#                              origin/main or the files given after it;
#                              needs build/compile_commands.json. The whole
#                              tree: scripts/tidy.py (.ci/run runs it)
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0 tidy=0
while [ $# -gt 0 ]; do
  case "$1" in
    --fix) fix=1; shift ;;
    --tidy) tidy=1; shift; break ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lint.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

format=$(command -v clang-format || true)
if [ -z "$format" ]; then
  echo "lint.sh: clang-format is not installed (scripts/setup.sh installs it)" >&2
  exit 77
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "lint.sh: not a git checkout: the sources are what git tracks" >&2
  exit 77
fi
mapfile -t sources < <(git ls-files '*.cc' '*.h' '*.cu' | grep -v '^tests/fixtures/')

status=0
if [ "$fix" = 1 ]; then
  "$format" -i "${sources[@]}"
  python3 scripts/error-codes.py --write
else
  bad=()
  for f in "${sources[@]}"; do
    "$format" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ "${#bad[@]}" -gt 0 ]; then
    echo "not formatted as .clang-format says (scripts/lint.sh --fix reformats them):"
    printf '  %s\n' "${bad[@]}"
    status=1
  else
    echo "${#sources[@]} sources formatted as .clang-format says"
  fi
  python3 scripts/error-codes.py --check || status=1
fi

if [ "$tidy" = 1 ]; then
  [ -f build/compile_commands.json ] || { echo "lint.sh --tidy: build/compile_commands.json is missing (configure build/ first)" >&2; exit 2; }
  if [ $# -gt 0 ]; then files=("$@"); else
    mapfile -t files < <(git diff --name-only origin/main -- '*.cc' 2>/dev/null || git diff --name-only HEAD~1 -- '*.cc')
  fi
  present=()
  for f in "${files[@]}"; do
    if [ -f "$f" ]; then present+=("$f"); fi
  done
  if [ "${#present[@]}" -gt 0 ]; then
    scripts/tidy.py "${present[@]}" || status=1
  fi
fi
exit "$status"
