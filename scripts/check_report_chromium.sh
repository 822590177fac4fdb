#!/usr/bin/env bash
# Check that a `capture-trainer analyze` report renders in a real browser, offline.
#
#   scripts/check_report_chromium.sh REPORT.html [SCREENSHOT.png]
#
# Needs Debian's `chromium` (apt-get install -y chromium); not used by the test suite.
# Three checks, each printed; exit 0 only if all pass:
#   1. no external references (src/href to http(s), <link>, <script src>) in the report;
#   2. every <img> decoded: a copy of the report gets a small inline script that, on the
#      window's load event, counts images with complete && naturalWidth > 0 and writes
#      the counts into the DOM; `chromium --headless --dump-dom` prints that DOM;
#   3. a screenshot of the first screenful is written (default REPORT.png) for a person
#      to look at.
# Network is not needed: the browser runs with background networking, sync, component
# updates and QUIC disabled and a throw-away profile.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 REPORT.html [SCREENSHOT.png]" >&2
    exit 2
fi
report=$(realpath "$1")
screenshot=$(realpath -m "${2:-${report%.html}.png}")
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
    echo "chromium not found (apt-get install -y chromium)" >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --hide-scrollbars --user-data-dir="$work/profile")

status=0
external=$(grep -Eoi '(src|href)="https?:[^"]*"|<link[^>]*>|<script[^>]*src=' "$report" | head -5 || true)
if [[ -n "$external" ]]; then
    echo "FAIL external references: $external"
    status=1
else
    echo "ok   no external references"
fi

probe='<script>window.addEventListener("load",function(){var i=Array.from(document.images);var d=i.filter(function(x){return x.complete&&x.naturalWidth>0;}).length;var p=document.createElement("pre");p.id="img-check";p.textContent="IMAGES "+d+"/"+i.length;document.body.appendChild(p);});</script>'
sed "s#</body>#${probe//&/\\&}</body>#" "$report" > "$work/probe.html"
dom=$("$browser" "${flags[@]}" --virtual-time-budget=10000 --dump-dom "file://$work/probe.html" 2>/dev/null || true)
counts=$(grep -o 'IMAGES [0-9]*/[0-9]*' <<<"$dom" || true)
declared=$(grep -o '<img ' "$report" | wc -l)
if [[ -z "$counts" ]]; then
    echo "FAIL the probe did not run (no IMAGES line in the dumped DOM)"
    status=1
else
    decoded=${counts#IMAGES }
    decoded_n=${decoded%/*}
    total_n=${decoded#*/}
    if [[ "$decoded_n" -eq "$total_n" && "$total_n" -eq "$declared" && "$total_n" -gt 0 ]]; then
        echo "ok   $decoded_n of $total_n images decoded (naturalWidth > 0)"
    else
        echo "FAIL $decoded_n of $total_n images decoded; the report declares $declared"
        status=1
    fi
fi

"$browser" "${flags[@]}" --window-size=1280,2400 --screenshot="$screenshot" "file://$report" >/dev/null 2>&1 || true
if [[ -s "$screenshot" ]]; then
    echo "ok   screenshot $screenshot"
else
    echo "FAIL no screenshot written"
    status=1
fi
exit $status
