#!/bin/bash
# Builds the request-decoder fuzzer with clang++ (-fsanitize=fuzzer,address) in a temp dir,
# seeds it with the captured PyTorch 1.13 traffic and the G2 handshake from
# shared/reference/tcpstore_protocol.md, and runs it for a bounded time.
# Usage: run_fuzzer.sh SOURCE_DIR [SECONDS]. Exit 77 (CTest: skipped) without clang++.
set -euo pipefail
source_dir=$1
seconds=${2:-20}
clang=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$clang" ]; then
  echo "SKIPPED: clang++ not found; install clang to run the decoder fuzzer"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$clang" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I"$source_dir" \
  "$source_dir/tests/rendezvous/fuzz/request_decoder_fuzzer.cpp" \
  "$source_dir/rendezvous/store/request_decoder.cpp" \
  "$source_dir/rendezvous/store/store_state.cpp" \
  "$source_dir/rendezvous/store/wire_protocol.cpp" \
  -o "$work/fuzzer"
mkdir "$work/corpus"
seed=0
while read -r line; do
  [ -z "$line" ] && continue
  printf "$(printf '%s' "$line" | sed 's/../\\x&/g')" > "$work/corpus/seed$seed"
  seed=$((seed + 1))
done < "$source_dir/tests/rendezvous/fuzz/seeds.hex"
"$work/fuzzer" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=1024 \
  -print_final_stats=1 "$work/corpus" 2>&1 | tail -15
