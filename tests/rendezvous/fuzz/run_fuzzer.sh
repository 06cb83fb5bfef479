#!/bin/bash
# Builds a store fuzzer with clang++ (-fsanitize=fuzzer,address) in a temp dir, seeds it with
# the captured PyTorch 1.13 traffic and the G2 handshake from shared/reference/
# tcpstore_protocol.md (and, for the job secret's handshake, its requests), and runs it for a
# bounded time.
# Usage: run_fuzzer.sh SOURCE_DIR [SECONDS] [TARGET]; TARGET is request_decoder (default) or
# auth_handshake. Exit 77 (CTest: skipped) without clang++.
set -euo pipefail
source_dir=$1
seconds=${2:-20}
target=${3:-request_decoder}
clang=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$clang" ]; then
  echo "SKIPPED: clang++ not found; install clang to run the decoder fuzzer"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$clang" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I"$source_dir" \
  "$source_dir/tests/rendezvous/fuzz/${target}_fuzzer.cpp" \
  "$source_dir/rendezvous/store/request_decoder.cpp" \
  "$source_dir/rendezvous/store/store_state.cpp" \
  "$source_dir/rendezvous/store/store_log.cpp" \
  "$source_dir/rendezvous/store/wire_protocol.cpp" \
  "$source_dir/rendezvous/store/auth_gate.cpp" \
  "$source_dir/rendezvous/store/job_auth.cpp" \
  "$source_dir/rendezvous/store/sha256.cpp" \
  -o "$work/fuzzer"
mkdir "$work/corpus"
seed=0
while read -r line; do
  [ -z "$line" ] && continue
  printf "$(printf '%s' "$line" | sed 's/../\\x&/g')" > "$work/corpus/seed$seed"
  seed=$((seed + 1))
done < "$source_dir/tests/rendezvous/fuzz/seeds.hex"
if [ "$target" = auth_handshake ]; then
  # The first byte picks the side (even: the store's, odd: the agent's); the seeds above feed
  # the store's side behind a 0 byte.
  for seed_file in "$work"/corpus/seed*; do
    { printf '\x00'; cat "$seed_file"; } > "$seed_file.store" && mv "$seed_file.store" "$seed_file"
  done
  # Store side: VALIDATE, AUTH_HELLO with its nonce, a proof, then a SET of an agents' key and
  # of a worker's key.
  printf '\x00\x00\xce\xf7\x85\x3c\xd0\x02%032d\xd1%032d\x01\x03\x00\x00\x00\x00\x00\x00\x00abc\x01\x00\x00\x00\x00\x00\x00\x00v' 0 0 \
    > "$work/corpus/auth0"
  printf '\x00\xd0\x02%032d\x01\x02\x00\x00\x00\x00\x00\x00\x00/k\x01\x00\x00\x00\x00\x00\x00\x00v' 0 \
    > "$work/corpus/auth1"
  # Agent side: a challenge (status, store nonce, proof) and "no secret".
  printf '\x01\x00%032d%032d' 0 0 > "$work/corpus/auth2"
  printf '\x01\x01' > "$work/corpus/auth3"
fi
"$work/fuzzer" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=1024 \
  -print_final_stats=1 "$work/corpus" 2>&1 | tail -15
