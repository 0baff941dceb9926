#!/bin/sh
# bench-peers: ddptok's gpt next to llm.c's CPU trainer and PyTorch DDP, same shapes, same
# threads, in one run on one machine.
#
#   tools/bench-peers.sh [--llmc LLMC_CHECKOUT] [--ddptok DDPTOK_RUN] [--steps N]
#                        [--shapes tiny,124m] [--unsharded]
#
# Shapes (both B = 4 sequences of T = 64 tokens per update, AdamW, 2 threads in all):
#   tiny  L 4, H 4, width 256, vocab 512
#   124m  L 12, H 12, width 768, vocab 50257 (GPT-2 124M)
# Peers, each optional and skipped with a message when absent:
#   ddptok   W = 2 ranks of 2 sequences, devices.threads = 1, `train --continuous`
#            (DDPTOK_RUN, default ./ddptok-run), its default build and GEMM, AdamW's
#            state sharded over the ranks (train.shard_optimizer = true; --unsharded:
#            every rank holds all of it);
#   llm.c    train_gpt2.c of LLMC_CHECKOUT (nothing is downloaded) built with its
#            Makefile's flags (-Ofast -march=native -fopenmp -DOMP), OMP_NUM_THREADS = 2,
#            B = 4, on the same model exported by `export --llmc`;
#   PyTorch  DDP over 2 processes of 1 thread each (gloo), 2 sequences per process, the
#            same architecture in float32 (python3's torch module: Debian python3-torch).
# Each times N steps (default 10) after 2 warm-up steps on random token ids and prints
# tokens per second and the peak resident memory (MiB) of all its processes together,
# then ddptok's rate over each peer's. On a shared machine repeat it and take medians.
set -eu
llmc="" run=./ddptok-run steps=10 shapes=tiny,124m shard=true
while [ $# -gt 0 ]; do
	case "$1" in
	--llmc) llmc=$(cd "$2" && pwd); shift 2 ;;
	--ddptok) run=$2; shift 2 ;;
	--steps) steps=$2; shift 2 ;;
	--shapes) shapes=$2; shift 2 ;;
	--unsharded) shard=false; shift ;;
	-h|--help) sed -n '2,23p' "$0"; exit 0 ;;
	*) echo "bench-peers: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
warm=2

# shape name -> "layers heads width vocab"
dims() {
	case "$1" in
	tiny) echo "4 4 256 512" ;;
	124m) echo "12 12 768 50257" ;;
	*) echo "bench-peers: unknown shape '$1' (tiny, 124m)" >&2; exit 2 ;;
	esac
}

# the ddptok configuration of a shape: $1 = dir, $2..$5 = layers heads width vocab
write_ini() {
	cat >"$1/shape.ini" <<EOF
[run]
outputs = "$1/outputs"
artifacts = "$1/artifacts"
[data]
train = 512
validation = 32
test = 32
min_len = 64
max_len = 64
vocab = $5
[model]
kind = gpt
layers = $2
heads = $3
width = $4
context = 64
layout = packed
[train]
updates = $((warm + steps))
accumulation = 1
batch_size = 2
optimizer = adamw
lr = 0.0001
plan = balanced
shard_optimizer = $shard
[devices]
backend = cpu
world = 2
threads = 1
EOF
}

# peak RSS in MiB of a command's process (GNU time's %M, KiB) into $1/rss; its output
# into $1/out
timed() {
	dir=$1; shift
	/usr/bin/time -f %M -o "$dir/rss.kib" "$@" >"$dir/out"
	echo $(($(cat "$dir/rss.kib") / 1024))
}

ddptok_peer() { # dir -> "tokens/s rss"
	rss=$(timed "$1" "$run" "$1/shape.ini" train --continuous)
	rate=$(python3 - "$1/artifacts/runs/latest/metrics.jsonl" "$warm" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][int(sys.argv[2]):]
print("%.0f" % (sum(r["N"] for r in rows) / sum(r["seconds"] for r in rows)))
EOF
)
	echo "$rate $rss"
}

build_llmc() {
	cat >"$work/driver.c" <<'EOF'
/* Times llm.c's training step alone: its main() is left out (TESTING). */
#define TESTING
#include "train_gpt2.c"
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
    if (argc != 5) return 2;
    int batch = 4, len = 64, steps = atoi(argv[3]), warm = atoi(argv[4]);
    GPT2 model;
    gpt2_build_from_checkpoint(&model, argv[1]);
    DataLoader loader;
    dataloader_init(&loader, argv[2], batch, len, 0, 1, 1);
    double timed = 0;
    for (int step = 0; step < warm + steps; step++) {
        double start = now();
        dataloader_next_batch(&loader);
        gpt2_forward(&model, loader.inputs, loader.targets, batch, len);
        gpt2_zero_grad(&model);
        gpt2_backward(&model);
        gpt2_update(&model, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f, step + 1);
        if (step >= warm) timed += now() - start;
    }
    printf("%.0f\n", batch * len * steps / timed);
    dataloader_free(&loader);
    gpt2_free(&model);
    return 0;
}
EOF
	cc -Ofast -march=native -fopenmp -DOMP -Wno-unused-result -I"$llmc" "$work/driver.c" \
		-lm -o "$work/llmc-driver"
}

llmc_peer() { # dir vocab -> "tokens/s rss"
	"$run" "$1/shape.ini" export --llmc "$1/model.bin" >/dev/null
	# llm.c's token files: 256 int32 (magic 20240520, version 1, count), then uint16 ids
	python3 - "$1/train.bin" "$2" <<'EOF'
import random, struct, sys
count, vocab = 100000, int(sys.argv[2])
rng = random.Random(1)
ids = [rng.randrange(vocab) for _ in range(count)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, count, *[0] * 253))
    f.write(struct.pack("<%dH" % count, *ids))
EOF
	rss=$(OMP_NUM_THREADS=2 timed "$1" "$work/llmc-driver" "$1/model.bin" "$1/train.bin" \
		"$steps" "$warm")
	echo "$(tail -n 1 "$1/out") $rss"
}

torch_peer() { # dir layers heads width vocab -> "tokens/s rss"
	rss=$(timed "$1" "$torch_py" "$here/bench-peers-torch.py" "$2" "$3" "$4" "$5" "$steps" "$warm")
	echo "$(tail -n 1 "$1/out" | cut -d' ' -f1) $(tail -n 1 "$1/out" | cut -d' ' -f2)"
	: "$rss" # the launcher's own; the ranks report theirs
}

# the python with torch: the one on PATH, else Debian's (python3-torch installs there)
torch_py=""
for py in python3 /usr/bin/python3; do
	if "$py" -c 'import torch, torch.distributed' 2>/dev/null; then torch_py=$py; break; fi
done
[ -n "$torch_py" ] || echo "bench-peers: PyTorch skipped: no python3 with the torch module (Debian: python3-torch)"
if [ -n "$llmc" ] && [ -f "$llmc/train_gpt2.c" ]; then
	build_llmc
else
	echo "bench-peers: llm.c skipped: no checkout given (--llmc DIR with train_gpt2.c)"
	llmc=""
fi

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-8s %10s %9s %8s\n' shape peer tokens/s "RSS MiB" "ddptok x"
for shape in $(echo "$shapes" | tr ',' ' '); do
	set -- $(dims "$shape")
	dir="$work/$shape"
	mkdir -p "$dir"
	write_ini "$dir" "$@"
	set -- $(ddptok_peer "$dir") "$@"
	base=$1
	printf '%-6s %-8s %10s %9s %8s\n' "$shape" ddptok "$1" "$2" "1.00x"
	shift 2
	if [ -n "$llmc" ]; then
		r=$(llmc_peer "$dir" "$4")
		printf '%-6s %-8s %10s %9s %8s\n' "$shape" llm.c ${r} \
			"$(python3 -c "print('%.2fx' % ($base / ${r%% *}))")"
	fi
	if [ -n "$torch_py" ]; then
		r=$(torch_peer "$dir" "$@")
		printf '%-6s %-8s %10s %9s %8s\n' "$shape" pytorch ${r} \
			"$(python3 -c "print('%.2fx' % ($base / ${r%% *}))")"
	fi
done
