# Sourced by the fixture benchmarks (runtime_fixtures.sh, alone_threads.sh):
# builds stretch (release), sets $S (the binary) and $out (their shared
# scratch folder), and defines prepare_fixture.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release -q -p stretch-cli
S="$CARGO_TARGET_DIR/release/stretch"
out="${TMPDIR:-/tmp}/stretch-runtime-bench"
mkdir -p "$out"

# prepare_fixture MODEL: $out/MODEL.onnx (random weights, seed 1) and its
# branched version planned on the host profile (cpu0, cpu1), with the plan's
# summary on stdout. PLAN_ARGS (words) are added to `stretch stretch`, e.g.
# PLAN_ARGS="--measure-on configs/runtime/host-ort.toml --cost-db DB.json"
# to plan on times onnxruntime measures.
prepare_fixture() {
  "$S" convert "fixtures/models/$1.onnx" --random-weights 1 -o "$out/$1.onnx" > /dev/null
  read -r -a plan_args <<< "${PLAN_ARGS:-}"
  "$S" stretch "fixtures/models/$1.onnx" --device configs/devices/host.toml --processors cpu0,cpu1 \
    "${plan_args[@]}" --random-weights 1 --plan-out "$out/$1.plan.json" -o "$out/$1.branched.onnx" | tail -3
}
