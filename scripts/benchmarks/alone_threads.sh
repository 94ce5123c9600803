#!/usr/bin/env bash
# Issue 16's lever "let the core that has no branch of its own help in the
# segments that are not branched": the same branched models benched with
# and without `alone_threads=2` on both processors (subgraphs nothing else
# of a request runs beside, i.e. stem, head, merges and stages Eq. 4 keeps
# whole, get two intra-op threads, free to use both cores), invocations
# interleaved (processor_variants.sh). Never while something builds.
#
#   ROUNDS=2 RUNS=30 scripts/benchmarks/alone_threads.sh [MODEL...]   (default: resnet18 mobilenet_v2)
VARIANTS="- ,alone_threads=2" exec "$(dirname "$0")/processor_variants.sh" "$@"
