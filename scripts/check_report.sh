#!/usr/bin/env bash
# Renders a report.html of `csam compare` / `csam sweep` in headless Chromium
# (Debian's `chromium`: apt-get install -y chromium) with every network name
# unresolvable, so that a page that needed anything but itself would show
# holes, and writes a full-page screenshot to look at. Also checks that the
# rendered DOM holds as many inline figures (<svg>) as the file.
#
# Usage: scripts/check_report.sh DIR [SCREENSHOT.png] [WIDTH,HEIGHT]
#   DIR          a compare or sweep directory (holds report.html)
#   SCREENSHOT   default DIR/report-screenshot.png
#   WIDTH,HEIGHT default 1400,3200 (the default compare's report is ~3000 px tall)
set -euo pipefail
dir=${1:?usage: scripts/check_report.sh DIR [SCREENSHOT.png] [WIDTH,HEIGHT]}
shot=${2:-$dir/report-screenshot.png}
size=${3:-1400,3200}
page=$(realpath "$dir/report.html")
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "error: no chromium on PATH; install it (Debian: apt-get install -y chromium)" >&2
  exit 1
fi
# Root cannot use Chromium's sandbox; no GPU is needed to rasterise a page.
flags=(--headless --disable-gpu --hide-scrollbars --no-first-run
       --host-resolver-rules="MAP * ~NOTFOUND")
[ "$(id -u)" = 0 ] && flags+=(--no-sandbox)
in_file=$(grep -o '<svg' "$page" | wc -l)
in_dom=$("$browser" "${flags[@]}" --dump-dom "file://$page" 2>/dev/null | grep -o '<svg' | wc -l)
if [ "$in_file" != "$in_dom" ]; then
  echo "error: $page has $in_file inline figures, Chromium's DOM $in_dom" >&2
  exit 1
fi
rm -f "$shot"
"$browser" "${flags[@]}" --screenshot="$shot" --window-size="$size" "file://$page" 2>/dev/null
if [ ! -s "$shot" ]; then
  echo "error: Chromium wrote no screenshot to $shot" >&2
  exit 1
fi
echo "rendered $page: $in_dom inline figures; screenshot $shot ($(stat -c %s "$shot") bytes)"
