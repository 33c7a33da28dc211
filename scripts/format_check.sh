#!/bin/bash
# Checks that every C/C++ line changed since BASE (committed or not) is as
# clang-format writes it (.clang-format): `git clang-format` formats only the
# changed lines, so the code written before BASE, which was never formatted,
# is fixed as it is touched. BASE is .ci/format-base unless given.
#   bash scripts/format_check.sh [BASE]
# Exit 0: formatted; 1: not (the diff that fixes it is printed); 2: cannot
# check (no base given, the formatter missing, git failed); 77: no history to
# tell what changed (not a git clone, or a shallow one without BASE), which
# ctest shows as skipped, with the reason.
# Run as ctest's Format.ChangedLinesAreClangFormatted; fix with (it formats
# only files whose changes are staged or committed)
#   git add -A && git clang-format-14 --binary clang-format-14 $(cat .ci/format-base)
set -u
cd "$(dirname "$0")/.."
base=${1:-$(cat .ci/format-base 2>/dev/null)}
formatter=clang-format-14
if [ -z "$base" ]; then
  echo "format check: no base commit (give one, or write it to .ci/format-base)" >&2
  exit 2
fi
for tool in "$formatter" "git-$formatter"; do
  if ! command -v "$tool" >/dev/null; then
    echo "format check: $tool is missing (scripts/setup.sh test installs it)" >&2
    exit 2
  fi
done
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "format check: $(pwd) is not a git work tree: cannot tell what changed" >&2
  exit 77
fi
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
  echo "format check: base commit $base is not in this clone (shallow?): cannot tell what changed" >&2
  exit 77
fi
out=$("git-$formatter" --binary "$formatter" --diff --extensions c,cc,cpp,h "$base" -- src tests fuzz bench 2>&1)
rc=$?
case $out in
  "no modified files to format" | "clang-format did not modify any files")
    echo "format check: every C/C++ line changed since ${base:0:12} is clang-formatted"
    exit 0
    ;;
esac
if [ $rc -ne 0 ] && [[ $out != diff* ]]; then
  echo "format check: git clang-format failed: $out" >&2
  exit 2
fi
echo "$out"
echo "format check: lines changed since ${base:0:12} are not clang-formatted (the diff above fixes them:" \
  "git add -A && git-$formatter --binary $formatter ${base:0:12})" >&2
exit 1
