#!/usr/bin/env bash
# Throughput and memory of translate + aggregate (the claude-code adapter,
# the aggregator and JSON encoding of every event) against a baseline that
# only splits lines and decodes each line's "type", measured in the same run
# on the same stream: 512 MiB built from the real claude-code captures.
# Target: translate at least 40% of the baseline's throughput, live heap flat
# from the first 64 MiB to the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
copies=${BENCH_COPIES:-8} # 64 MiB each
out=$(go test -run '^$' -bench 'BenchmarkStream(Baseline|Translate)$' -benchtime "${copies}x" -count 1 ./runner/)
echo "$out" | grep -E '^Benchmark'
echo "$out" | awk -v mib=$((copies * 64)) '
  /^BenchmarkStreamBaseline/  { for (i = 1; i <= NF; i++) { if ($(i+1) == "MB/s") base = $i; if ($(i+1) == "heap-first-MB") bf = $i; if ($(i+1) == "heap-last-MB") bl = $i } }
  /^BenchmarkStreamTranslate/ { for (i = 1; i <= NF; i++) { if ($(i+1) == "MB/s") tr = $i; if ($(i+1) == "heap-first-MB") tf = $i; if ($(i+1) == "heap-last-MB") tl = $i } }
  END {
    if (base == 0 || tr == 0) { print "bench: could not read the results"; exit 1 }
    ratio = tr / base * 100
    printf "stream: %d MiB of real claude-code lines\n", mib
    printf "baseline (split + decode type): %.1f MB/s\n", base
    printf "translate + aggregate + encode: %.1f MB/s = %.0f%% of baseline (target >= 40%%)\n", tr, ratio
    printf "live heap, translate: %.1f MiB after 64 MiB, %.1f MiB after %d MiB (the 64 MiB input block included)\n", tf, tl, mib
    printf "live heap, baseline:  %.1f MiB after 64 MiB, %.1f MiB after %d MiB\n", bf, bl, mib
    if (ratio < 40) { print "bench: below target"; exit 2 }
  }'
