# Shared by the gpu-*.sh end-to-end tests: skip (exit 77) unless this build has the CUDA
# backend and a GPU is visible; sets GPUS to the number of visible GPUs.
GPUS=$("$DDPTOK" "$CONF/tiny.ini" env 2>/dev/null | sed -n 's/^GPUs  *\([0-9][0-9]*\)$/\1/p')
if [ -z "$GPUS" ] || [ "$GPUS" -lt 1 ]; then
	echo "skip: no GPU visible (or the CUDA backend is not built)"
	"$DDPTOK" "$CONF/tiny.ini" env 2>&1 | grep -E '^(cuda backend|GPUs|CUDA driver|NVIDIA driver|needs)' || true
	exit 77
fi
# a model big enough for cuBLAS to matter, small enough to be quick
MID="--set data.vocab=64 --set model.context=4 --set model.embed=16 --set model.hidden=64 --set data.max_len=48 --set data.min_len=8"
