#!/usr/bin/env bash
# Throughput and memory of translate (a runtime's adapter, the aggregator
# and the JSON encoding of every event: `agentrun translate` without the
# process) against a baseline that only splits lines and decodes each
# line's "type" with encoding/json, for every runtime (claude-code, codex,
# pi, dsh), each measured in the same run on the same stream: 64 MiB built
# from that runtime's real captures (adapters/<runtime>/testdata/real, ids
# renamed per copy), fed BENCH_COPIES times (default 8: 512 MiB). Each
# benchmark runs in its own process so that its peak RSS is its own.
#
# Targets (docs/benchmarks.md), for every runtime: translate at least 0.8
# of the baseline's throughput; memory flat with input size: the live heap
# after the whole stream within 8 MiB of the live heap after its first
# 64 MiB, and the peak RSS for the whole stream within 16 MiB of the peak
# for 64 MiB.
#
# Usage: hack/bench.sh [--check]   (--check: exit 2 when a runtime misses a target)
# BENCH_RUNTIMES="codex pi" measures only those.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
check=false
case "${1:-}" in
--check) check=true ;;
"") ;;
*) echo "usage: hack/bench.sh [--check]" >&2; exit 64 ;;
esac
copies=${BENCH_COPIES:-8} # 64 MiB each
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go test -c -o "$bin/runner.test" ./runner/
run() { # NAME RUNTIME COPIES
  (cd runner && "$bin/runner.test" -test.run '^$' -test.bench "^BenchmarkStream$1\$/^$2\$" \
    -test.benchtime "$3x" -test.benchmem -test.count 1) | grep -E '^BenchmarkStream'
}
missed=()
ratios=()
for rt in ${BENCH_RUNTIMES:-claude-code codex pi dsh}; do
  base=$(run Baseline "$rt" "$copies")
  tr=$(run Translate "$rt" "$copies")
  tr1=$(run Translate "$rt" 1)
  printf '%s\n%s\n%s (1 copy)\n' "$base" "$tr" "$tr1"
  rc=0
  printf '%s\n%s\n%s\n' "$base" "$tr" "$tr1" | awk -v rt="$rt" -v out="$bin/ratio" -v mib=$((copies * 64)) '
  function field(unit,   i) { for (i = 1; i < NF; i++) if ($(i+1) == unit) return $i; return "" }
  NR == 1 { base = field("MB/s"); bf = field("heap-first-MB"); bl = field("heap-last-MB"); bb = field("B/op"); ba = field("allocs/op"); bp = field("peak-rss-MB") }
  NR == 2 { tr = field("MB/s"); tf = field("heap-first-MB"); tl = field("heap-last-MB"); tb = field("B/op"); ta = field("allocs/op"); tp = field("peak-rss-MB") }
  NR == 3 { tp1 = field("peak-rss-MB") }
  END {
    if (base == 0 || tr == 0 || tp1 == "") { print "bench: " rt ": could not read the results"; exit 1 }
    ratio = tr / base
    printf "stream: %d MiB of real %s lines (64 MiB, %d times)\n", mib, rt, mib / 64
    printf "baseline (split + decode type): %.1f MB/s\n", base
    printf "translate + aggregate + encode: %.1f MB/s = %.2f of baseline (target >= 0.80)\n", tr, ratio
    printf "allocated per 64 MiB: translate %.1f MiB in %d allocs, baseline %.1f MiB in %d allocs\n", tb / 1048576, ta, bb / 1048576, ba
    printf "live heap, translate: %.1f MiB after 64 MiB, %.1f MiB after %d MiB (the 64 MiB input block included)\n", tf, tl, mib
    printf "live heap, baseline:  %.1f MiB after 64 MiB, %.1f MiB after %d MiB\n", bf, bl, mib
    printf "peak RSS, translate:  %.1f MiB for 64 MiB, %.1f MiB for %d MiB (baseline %.1f MiB)\n", tp1, tp, mib, bp
    bad = 0
    if (ratio < 0.8) { print "bench: " rt ": translate below 0.80 of the baseline"; bad = 1 }
    if (tl > tf + 8) { print "bench: " rt ": live heap grows with the input"; bad = 1 }
    if (tp > tp1 + 16) { print "bench: " rt ": peak RSS grows with the input"; bad = 1 }
    printf "%.2f\n", ratio > out
    if (bad) exit 2
  }' || rc=$?
  case $rc in
  0) ;;
  2) missed+=("$rt") ;;
  *) exit "$rc" ;;
  esac
  ratios+=("$rt $(cat "$bin/ratio")")
  echo
done
printf 'ratios of baseline: %s\n' "$(IFS=,; echo "${ratios[*]}" | sed 's/,/, /g')"
if [ ${#missed[@]} -gt 0 ]; then
  echo "bench: targets missed by: ${missed[*]}"
  if $check; then exit 2; fi
fi
