#!/usr/bin/env bash
# Training throughput (images/s) of resnet18 at 32x32, batch 64, on 1 and 2
# threads: stretch (burn flex backend) training fixtures/models/resnet18_bn.onnx
# (torchvision's resnet18 with its 20 BatchNorm layers kept) and, in the same
# run when torch and torchvision are importable, PyTorch training
# torchvision's resnet18 (the same network) on the same shapes. stretch at T
# threads and PyTorch at T threads run one after the other, T = 1 then 2.
#
#   scripts/benchmarks/train_throughput.sh [EPOCHS]   (default 2; the last epoch is reported, so the first warms up)
#
# stretch's figure is the training images/s its own epoch report prints
# (forward, backward and SGD update over 1438 digits images upscaled to
# 32x32 RGB; validation excluded). PyTorch's is measured on random batches of
# the same shape with the same optimizer (SGD, momentum 0.9, weight decay).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
EPOCHS="${1:-2}"
cargo build --release -q -p stretch-cli
STRETCH="$CARGO_TARGET_DIR/release/stretch"
PY="${STRETCH_PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

declare -A OURS THEIRS
HAVE_TORCH=0
"$PY" -c "import torch, torchvision" 2>/dev/null && HAVE_TORCH=1
for T in 1 2; do
  out="$("$STRETCH" train fixtures/models/resnet18_bn.onnx --input-shape 1,3,32,32 --random-weights 1 \
    --replace-head --dataset digits --epochs "$EPOCHS" --batch-size 64 --threads "$T" -o "$TMP/r18-$T.onnx")"
  OURS[$T]="$(echo "$out" | grep -o '([0-9.]* img/s)' | tail -1 | tr -d '(' | cut -d' ' -f1)"
  echo "stretch (burn flex), $T thread(s): ${OURS[$T]} images/s"
  if [ "$HAVE_TORCH" = 1 ]; then
    THEIRS[$T]="$("$PY" - "$T" <<'PY'
import sys, time, torch, torchvision
torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
x, y = torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))
loss_fn = torch.nn.CrossEntropyLoss()
def step():
    opt.zero_grad(); loss_fn(m(x), y).backward(); opt.step()
for _ in range(3): step()
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < 20:
    step(); n += 64
print(f"{n / (time.perf_counter() - t0):.1f}")
PY
)"
    echo "PyTorch $("$PY" -c 'import torch; print(torch.__version__)'), $T thread(s): ${THEIRS[$T]} images/s"
  fi
done
if [ "$HAVE_TORCH" = 1 ]; then
  for T in 1 2; do
    echo "$T thread(s): stretch / PyTorch = $(awk -v a="${OURS[$T]}" -v b="${THEIRS[$T]}" 'BEGIN{printf "%.2f", a/b}')"
  done
else
  echo "PyTorch reference: not measured (torch/torchvision not importable by $PY; pip install torch torchvision to compare)"
fi
