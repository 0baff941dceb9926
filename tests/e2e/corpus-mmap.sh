# corpus-mmap: the prepared corpus is mapped from its file, not copied into memory. The same
# model trained on a corpus 30 times larger holds the same anonymous memory (model,
# optimizer state, batches), as the summary line of train reports it; the corpus's pages are
# the file's (file pages, which the kernel reads on demand and may drop again). A corpus
# held in memory would add its ~40 MiB to the anonymous figure.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
C="$CONF/minimum.ini"
lens="--set data.min_len=300 --set data.max_len=700 --set devices.backend=cpu"
mib() { # mib FILE FIELD: the MiB figure after FIELD in the train line "memory: ..."
	sed -n "s/^train: memory: .*$2 \([0-9.]*\) MiB.*/\1/p" "$1"
}
for n in 600 20000; do
	# prepared by its own process: the train's holds only what it maps (a corpus that
	# train itself draws is freed before it is mapped, but an allocator may keep the
	# freed memory: AddressSanitizer's quarantine does)
	set -- --set data.train=$n --set run.outputs=out-$n --set run.artifacts=art-$n
	# shellcheck disable=SC2086 # the word splitting of $lens is wanted
	timeout 300 "$DDPTOK" "$C" prepare "$@" $lens > prepare-$n.txt 2>&1 ||
		{ cat prepare-$n.txt; fail "prepare $n sequences"; }
	# shellcheck disable=SC2086
	timeout 300 "$DDPTOK" "$C" train "$@" $lens --set train.updates=3 --set train.stop_at=0 \
		> train-$n.txt 2>&1 || { cat train-$n.txt; fail "train on $n sequences"; }
	grep -q "^train: memory: resident .*; corpus [0-9.]* MiB, mapped from its file" \
		train-$n.txt || fail "no memory line: $(cat train-$n.txt)"
done
small=$(stat -c %s out-600/corpus/corpus.bin)
large=$(stat -c %s out-20000/corpus/corpus.bin)
a_small=$(mib train-600.txt anonymous)
a_large=$(mib train-20000.txt anonymous)
echo "corpus $small -> $large bytes; anonymous memory $a_small -> $a_large MiB"
python3 - "$small" "$large" "$a_small" "$a_large" <<'PY' || fail "anonymous memory grew with the corpus"
import sys
small, large, a_small, a_large = (float(x) for x in sys.argv[1:])
grew = (a_large - a_small) * 2**20
# the corpus grew ~38 MiB; the sequences' own tables (a few bytes per sequence, under
# 1 MiB here) may add, the tokens may not: at most a tenth of the corpus's growth
assert large > 20 * small, (small, large)
sys.exit(0 if grew < (large - small) / 10 else 1)
PY
echo "corpus-mmap: ok"
