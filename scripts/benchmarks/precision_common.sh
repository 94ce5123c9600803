# Sourced by the precision benchmarks (precision.sh, precision_accuracy.sh,
# precision_agreement.sh): moves to the repository root, sets $STRETCH
# (builds the release binary unless $STRETCH is set), $PY (the set-up's
# Python, else python3), $DATA and $DEVICE, and defines `need_fashion`,
# which stops with a message when Fashion-MNIST is not installed.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
DATA="${DATA:-/usr/share/datasets/fashion-mnist}"
DEVICE=configs/devices/snapdragon855.toml
if [[ -z "${STRETCH:-}" ]]; then
  cargo build --release -q -p stretch-cli
  STRETCH="$CARGO_TARGET_DIR/release/stretch"
fi
PY=.venv/bin/python
[[ -x "$PY" ]] || PY=python3
need_fashion() {
  if [[ ! -d "$DATA" ]]; then
    echo "Fashion-MNIST is not installed: as root, apt-get install dataset-fashion-mnist (or run scripts/setup.sh)" >&2
    exit 1
  fi
}
