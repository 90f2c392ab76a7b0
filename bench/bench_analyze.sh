#!/usr/bin/env bash
# Time and peak memory of `hangtrace analyze` against the number of ranks,
# on simulated jobs (seed-hang fault, TP=8, PP=16, DP grows). Writes
# bench/analyze_curve_<records>.{tsv,svg}, and prints the table.
#   bench/bench_analyze.sh [RECORDS_PER_RANK] [RANK_COUNTS...]
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-200}
shift || true
counts=${*:-1024 4096 16384 65536 131072}
work=$(mktemp -d /tmp/hangtrace-bench-analyze-XXXXXX)
trap 'rm -rf "$work"' EXIT
out=bench/analyze_curve_${records}.tsv
echo -e "ranks\trecords_per_rank\trecords\tanalyze_s\tpeak_mib" > "$out"
for n in $counts; do
  dp=$((n / 128))
  rm -rf "$work/sim"
  build/bin/hangtrace simulate --tp 8 --pp 16 --dp "$dp" --records "$records" \
    --fault seed-hang@rank=127 --out "$work/sim" 2> "$work/sim.log"
  total=$(sed -n 's/.*steps, \([0-9]*\) records.*/\1/p' "$work/sim.log")
  find "$work/sim/sim" -name "*.htrace" -exec cat {} + > /dev/null   # warm the page cache, as for a live dump
  best=""
  for _ in 1 2 3; do
    # Exit status 3: a hang found (the seed's); time's last line is the figures.
    /usr/bin/time -f "%e %M" -o "$work/t" build/bin/hangtrace analyze "$work/sim/sim" > "$work/report" || [ $? -eq 3 ]
    read -r s kb < <(tail -1 "$work/t")
    if [ -z "$best" ] || awk "BEGIN{exit !($s < $best)}"; then best=$s; mem=$kb; fi
  done
  grep -q "culprit rank 127 " "$work/report" || { echo "wrong culprit at $n ranks"; head -3 "$work/report"; exit 1; }
  echo -e "$n\t$records\t$total\t$best\t$((mem / 1024))" >> "$out"
  echo -e "$n ranks x $records records: ${best} s, $((mem / 1024)) MiB"
done
python3 - "$out" "bench/analyze_curve_${records}.svg" <<'PY'
import sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n")[1:] if l]
xs = [int(r[0]) for r in rows]; ts = [float(r[3]) for r in rows]; ms = [float(r[4]) for r in rows]
W, H, L, B = 640, 360, 70, 50
def sx(x): return L + (W - L - 60) * (x - 0) / max(xs)
def sy(v, top): return H - B - (H - B - 30) * v / top
tmax, mmax = max(ts) * 1.15, max(ms) * 1.15
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W/2}" y="18" text-anchor="middle" font-size="14">hangtrace analyze: wall time and peak memory ({rows[0][1]} records per rank, 2 cores)</text>',
       f'<line x1="{L}" y1="{H-B}" x2="{W-60}" y2="{H-B}" stroke="black"/>',
       f'<line x1="{L}" y1="30" x2="{L}" y2="{H-B}" stroke="black"/>',
       f'<line x1="{W-60}" y1="30" x2="{W-60}" y2="{H-B}" stroke="black"/>',
       f'<text x="{(L+W-60)/2}" y="{H-12}" text-anchor="middle">ranks</text>',
       f'<text x="16" y="{H/2}" transform="rotate(-90 16 {H/2})" text-anchor="middle" fill="#1f77b4">seconds</text>',
       f'<text x="{W-12}" y="{H/2}" transform="rotate(90 {W-12} {H/2})" text-anchor="middle" fill="#d62728">peak MiB</text>']
for x in xs:
    svg.append(f'<text x="{sx(x)}" y="{H-B+16}" text-anchor="middle">{x//1024}k</text>')
for i in range(5):
    v = tmax * i / 4; svg.append(f'<text x="{L-6}" y="{sy(v,tmax)+4}" text-anchor="end" fill="#1f77b4">{v:.1f}</text>')
    m = mmax * i / 4; svg.append(f'<text x="{W-54}" y="{sy(m,mmax)+4}" fill="#d62728">{m:.0f}</text>')
for vals, top, color in ((ts, tmax, "#1f77b4"), (ms, mmax, "#d62728")):
    pts = " ".join(f"{sx(x):.1f},{sy(v,top):.1f}" for x, v in zip(xs, vals))
    svg.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
    svg += [f'<circle cx="{sx(x):.1f}" cy="{sy(v,top):.1f}" r="3" fill="{color}"/>' for x, v in zip(xs, vals)]
svg.append("</svg>")
open(sys.argv[2], "w").write("\n".join(svg) + "\n")
PY
echo "wrote $out and bench/analyze_curve_${records}.svg"
