# Sourced by the benchmarks that run a LibTorch `stretch` built elsewhere
# (scripts/build_libtorch.sh --for-torch VERSION) on a GPU machine
# (fashion_mnist_gpu.sh, gpu_train_ab.sh): exports LD_LIBRARY_PATH with
# python3's torch libraries (or TORCH_LIB) and OMP_NUM_THREADS=2, and
# defines `unpack BINARY DEST`, which prints the path of an executable copy
# of BINARY (decompressed to DEST when it ends in .gz or .xz; .xz with
# python3's lzma where the machine has no xz).
TORCH_LIB=${TORCH_LIB:-$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')} || exit 1
export LD_LIBRARY_PATH="$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_NUM_THREADS=2

unpack() {
  local bin="$1" dest="$2"
  case "$bin" in
    *.gz) gzip -dc "$bin" >"$dest" && chmod +x "$dest" && bin="$dest" ;;
    *.xz)
      if command -v xz >/dev/null; then xz -dc "$bin" >"$dest"; else
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$bin" >"$dest"
      fi && chmod +x "$dest" && bin="$dest" ;;
  esac
  realpath "$bin"
}
