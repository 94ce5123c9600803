#!/usr/bin/env bash
# The processors' `wait=poll` (poll for the next subgraph or result while a
# request is in flight instead of blocking after 0.1 ms, so no thread pays a
# wake-up between the subgraphs of a request) against the default
# `wait=block`, both with alone_threads=2 as configs/runtime/host.toml has
# it; invocations interleaved (processor_variants.sh). Never while something
# builds.
#
#   ROUNDS=2 RUNS=30 scripts/benchmarks/wait_poll.sh [MODEL...]   (default: resnet18 mobilenet_v2)
VARIANTS=",alone_threads=2 ,alone_threads=2,wait=poll" exec "$(dirname "$0")/processor_variants.sh" "$@"
