#!/usr/bin/env bash
# Scripted check that an HTML report renders in headless Chromium (Debian's
# `chromium`, installed by `scripts/setup.sh --with-chromium`): the parsed
# page must hold the expected number of SVG charts, and a screenshot is
# written for a person to look at.
#
#   scripts/check_html.sh REPORT.html [SCREENSHOT.png] [MIN_CHARTS]
set -euo pipefail

html=${1:?usage: check_html.sh REPORT.html [SCREENSHOT.png] [MIN_CHARTS]}
png=${2:-${html%.html}.png}
min_charts=${3:-1}
[ -f "$html" ] || { echo "check_html: '$html' does not exist" >&2; exit 2; }
command -v chromium >/dev/null || { echo "check_html: chromium is not installed (run: scripts/setup.sh --with-chromium)" >&2; exit 2; }

url="file://$(realpath "$html")"
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-dev-shm-usage
       --disable-extensions --no-first-run --hide-scrollbars)

# The DOM as Chromium parsed it: count the charts it built.
dom=$(chromium "${flags[@]}" --dump-dom "$url" 2>/dev/null)
charts=$(grep -o '<svg class="chart"' <<<"$dom" | wc -l)
if [ "$charts" -lt "$min_charts" ]; then
  echo "check_html: Chromium parsed $charts chart(s) in '$html'; expected at least $min_charts" >&2
  exit 1
fi

# Tall enough for the whole page; a person looks at this.
chromium "${flags[@]}" --window-size=1300,4000 --screenshot="$png" "$url" >/dev/null 2>&1
size=$(stat -c %s "$png" 2>/dev/null || echo 0)
if [ "$size" -lt 20000 ]; then
  echo "check_html: the screenshot '$png' is missing or blank ($size bytes)" >&2
  exit 1
fi
echo "check_html: '$html' renders in Chromium: $charts chart(s); screenshot $png ($size bytes)"
