#!/bin/sh
# bench-llmc: ddptok's gpt next to llm.c's CPU trainer, same shape, same threads.
#
#   tools/bench-llmc.sh LLMC_CHECKOUT [DDPTOK_RUN] [STEPS]
#
# LLMC_CHECKOUT is a checkout of llm.c (its train_gpt2.c and llmc/ are used; nothing is
# downloaded). The shape is the one docs/performance.md compares: B = 4 sequences of
# T = 64 tokens, L = 4, H = 4, width 256, vocab 512. In a temporary directory it
#   1. trains a ddptok gpt of that shape for one update and exports it with
#      `export --llmc` (llm.c needs a model file; the weights do not change the speed);
#   2. writes random token files in llm.c's data format (ids < 512);
#   3. builds a timing driver around llm.c's train_gpt2.c with its Makefile's flags
#      (-Ofast -march=native -fopenmp -DOMP): no sampling, no validation, no tokenizer;
#      it times STEPS steps (forward, backward, AdamW update) after 2 warm-up steps;
#   4. runs llm.c with OMP_NUM_THREADS = 1 and 2 and ddptok's `bench` with W = 1 and
#      devices.threads = 1 and 2, and W = 2 with 2 sequences per rank (the same 4 in all);
# and prints tokens/s side by side. On a shared machine repeat it and take medians.
set -eu
llmc=${1:?usage: bench-llmc.sh LLMC_CHECKOUT [DDPTOK_RUN] [STEPS]}
run=${2:-./ddptok-run}
steps=${3:-20}
llmc=$(cd "$llmc" && pwd)
test -f "$llmc/train_gpt2.c" || { echo "bench-llmc: no train_gpt2.c in $llmc" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/shape.ini" <<EOF
[run]
outputs = "$work/outputs"
artifacts = "$work/artifacts"
[data]
train = 512
validation = 32
test = 32
min_len = 64
max_len = 64
vocab = 512
[model]
kind = gpt
layers = 4
heads = 4
width = 256
context = 64
layout = packed
[train]
updates = 1
accumulation = 1
batch_size = 4
optimizer = adamw
lr = 0.0001
plan = balanced
[devices]
backend = cpu
world = 1
threads = 1
EOF
"$run" "$work/shape.ini" train --continuous >/dev/null
"$run" "$work/shape.ini" export --llmc "$work/model.bin" >/dev/null

# llm.c's token files: 256 int32 (magic 20240520, version 1, count), then uint16 ids
python3 - "$work/train.bin" <<'EOF'
import random, struct, sys
count = 100000
header = [20240520, 1, count] + [0] * 253
ids = [random.Random(1).randrange(512) for _ in range(count)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", *header) + struct.pack("<%dH" % count, *ids))
EOF

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
    if (argc != 4) return 2;
    int batch = 4, len = 64, warm = 2, steps = atoi(argv[3]);
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
cc -Ofast -march=native -fopenmp -DOMP -Wno-unused-result -I"$llmc" "$work/driver.c" -lm \
	-o "$work/llmc-driver"

llmc_rate() {
	OMP_NUM_THREADS=$1 "$work/llmc-driver" "$work/model.bin" "$work/train.bin" "$steps" | tail -n 1
}
ddptok_rate() {
	"$run" "$work/shape.ini" bench --windows 50 "$@" >/dev/null
	python3 -c 'import json,sys; print("%.0f" % json.load(open(sys.argv[1]))["tokens_per_s"])' \
		"$work/outputs/bench.json"
}
row() {
	printf '%-34s %10s %10s %7s\n' "$1" "$2" "$3" "$(python3 -c "print('%.2fx' % ($2 / $3))")"
}
printf '%-34s %10s %10s %7s\n' "setting (B = 4, T = 64)" ddptok llm.c ratio
one=$(llmc_rate 1)
two=$(llmc_rate 2)
row "1 thread: W = 1, threads 1" "$(ddptok_rate)" "$one"
row "2 threads: W = 1, threads 2" "$(ddptok_rate --set devices.threads=2)" "$two"
row "2 threads: W = 2, 2 seqs per rank" \
	"$(ddptok_rate --set devices.world=2 --set train.batch_size=2)" "$two"
