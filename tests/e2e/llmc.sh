# llm.c interoperability: `export --llmc` writes a gpt checkpoint as llm.c's GPT-2 model
# file (header fields, padded vocabulary rows zero; float32, or bfloat16 with --dtype
# bf16), `model.init = llmc:FILE` starts a run from it bit for bit (a bfloat16 file: its
# values converted) (parity --dump's params.npy holds the initial parameters), on
# the synthetic corpus (every row kept) and on a file source (the reserved rows left
# out); damaged files, a file of another shape and a non-gpt checkpoint are refused
# with their exit codes and messages naming the file, the field and the key.
set -eu
py() { python3 "$E2E/llmc-params.py" "$@"; }
. "$E2E/fails.sh"
G="$CONF/gpt-tiny.ini"
small="--set model.layers=2 --set model.width=32 --set data.train=32 --set train.updates=2
	--set devices.world=1"
# shellcheck disable=SC2086 # the word splitting of $small is wanted
"$DDPTOK" "$G" train --continuous $small > train.txt
# shellcheck disable=SC2086
"$DDPTOK" "$G" export --llmc gpt.bin $small > export.txt
grep -q "^export: checkpoint .* written to gpt.bin" export.txt
# maxT V L NH C Vp; the rest of the header zero
[ "$(py --header gpt.bin)" = "20240326 3 128 512 2 4 32 512 0" ] || { py --header gpt.bin; exit 1; }
# shellcheck disable=SC2086
"$DDPTOK" "$G" parity --dump seeded $small > /dev/null
# shellcheck disable=SC2086
"$DDPTOK" "$G" parity --dump loaded $small --set model.init=llmc:gpt.bin > /dev/null
[ "$(py loaded/params.npy gpt.bin 0)" = equal ]
[ "$(py seeded/params.npy gpt.bin 0)" = differ ] # the check can fail
# bfloat16 (version 5, llm.c's GPU trainer's): the same layout in 2-byte values, read
# back as the float32 values rounded to nearest even, saying so
# shellcheck disable=SC2086
"$DDPTOK" "$G" export --llmc gpt16.bin --dtype bf16 $small > export16.txt
grep -q "written to gpt16.bin: llm.c GPT-2 model file (bfloat16)" export16.txt
[ "$(py --header gpt16.bin)" = "20240326 5 128 512 2 4 32 512 0" ] || { py --header gpt16.bin; exit 1; }
[ "$(stat -c %s gpt16.bin)" = $((1024 + ($(stat -c %s gpt.bin) - 1024) / 2)) ]
# shellcheck disable=SC2086
"$DDPTOK" "$G" parity --dump loaded16 $small --set model.init=llmc:gpt16.bin > l16.txt
grep -q "model.init: llmc:gpt16.bin holds bfloat16 weights: converted to float32" l16.txt
ck=artifacts/gpt-tiny/runs/$(readlink artifacts/gpt-tiny/runs/latest)/step-0002
[ "$(py --bf16 loaded16/params.npy "$ck/params.npy")" = equal ]
[ "$(py --bf16 loaded/params.npy "$ck/params.npy")" = differ ] # the check can fail
# the key is recorded in the checkpoints' configuration
grep -q '^init = ""$' artifacts/gpt-tiny/runs/latest/step-0002/config.ini
# a run started from the file records it, and resumes without it (the checkpoint's
# parameters replace the file's)
cp gpt.bin start.bin
# shellcheck disable=SC2086
"$DDPTOK" "$G" train $small --set train.stop_at=1 --set model.init=llmc:start.bin \
	--set run.artifacts=from-file > /dev/null
grep -q '^init = "llmc:start.bin"$' from-file/runs/latest/step-0001/config.ini
rm start.bin
# shellcheck disable=SC2086
"$DDPTOK" "$G" train --resume latest $small --set model.init=llmc:start.bin \
	--set run.artifacts=from-file > resume.txt
grep -q "step-0002" resume.txt

# a file source: llm.c's row u is the user's id u, the model's u + 4; vocabulary padded
D="$CONF/own-data.ini"
own="--set model.kind=gpt --set model.context=64 --set model.layers=1 --set model.width=16
	--set model.heads=2 --set devices.world=1 --set train.updates=2
	--set run.artifacts=own-art --set run.outputs=own-out"
# shellcheck disable=SC2086
"$DDPTOK" "$D" train --continuous $own > /dev/null
# shellcheck disable=SC2086
"$DDPTOK" "$D" export --llmc own.bin $own > export2.txt
grep -q "4 reserved rows left out" export2.txt
# shellcheck disable=SC2046 # magic version maxT V L NH C Vp rest
set -- $(py --header own.bin)
[ $(($8 % 128)) = 0 ] && [ "$8" -ge "$4" ] && [ "$4" -lt 128 ] || { echo "FAIL: V $4 Vp $8"; exit 1; }
# shellcheck disable=SC2086
"$DDPTOK" "$D" parity --dump own-loaded $own --set model.init=llmc:own.bin > /dev/null
[ "$(py own-loaded/params.npy own.bin 4)" = equal ]
[ "$(py own-loaded/params.npy own.bin 0)" = differ ]

# damaged or unfitting files: exit 5 (data) or 3 (configuration), naming file and field
head -c 2000 gpt.bin > short.bin
cp gpt.bin magic.bin && printf '\001' | dd of=magic.bin bs=1 count=1 conv=notrunc 2> /dev/null
cp gpt.bin version.bin && printf '\007' | dd of=version.bin bs=1 seek=4 count=1 conv=notrunc 2> /dev/null
# shellcheck disable=SC2086
fails 5 "llm.c model file short.bin: truncated" "$DDPTOK" "$G" parity $small --set model.init=llmc:short.bin
# shellcheck disable=SC2086
fails 5 "llm.c model file magic.bin: magic" "$DDPTOK" "$G" parity $small --set model.init=llmc:magic.bin
# shellcheck disable=SC2086
fails 5 "llm.c model file version.bin: version 7, expected 3 (float32 weights) or 5 (bfloat16)" "$DDPTOK" "$G" parity $small --set model.init=llmc:version.bin
mkdir dir.bin
# shellcheck disable=SC2086
fails 4 "llm.c model file dir.bin: not a regular file (a directory)" "$DDPTOK" "$G" parity $small --set model.init=llmc:dir.bin
# a FIFO is refused at once (it used to block in open() for a writer that never came)
mkfifo fifo.bin
# shellcheck disable=SC2086
fails 4 "llm.c model file fifo.bin: not a regular file (a FIFO)" timeout 60 "$DDPTOK" "$G" parity $small --set model.init=llmc:fifo.bin
# NaN or infinite weights are refused, naming the file and the tensor: an infinity in
# the first weight of wte, a NaN in the file's last float
size=$(wc -c < gpt.bin)
cp gpt.bin inf.bin && printf '\000\000\200\177' | dd of=inf.bin bs=1 seek=1024 count=4 conv=notrunc 2> /dev/null
cp gpt.bin nan.bin && printf '\000\000\300\177' | dd of=nan.bin bs=1 seek=$((size - 4)) count=4 conv=notrunc 2> /dev/null
# shellcheck disable=SC2086
fails 5 "llm.c model file inf.bin: its weights hold 1 non-finite value, the first in tensor wte\[0, 0\] = inf" "$DDPTOK" "$G" parity $small --set model.init=llmc:inf.bin
# shellcheck disable=SC2086
fails 5 "llm.c model file nan.bin: its weights hold 1 non-finite value, the first in tensor .* = nan" "$DDPTOK" "$G" train $small --set model.init=llmc:nan.bin --set run.artifacts=nan-art
[ ! -e nan-art/runs/latest ] || { echo "FAIL: a run from nan.bin left runs/latest"; exit 1; }
# shellcheck disable=SC2086
fails 3 "gpt.bin: header field L = 2, but model.layers needs 3" "$DDPTOK" "$G" parity $small --set model.layers=3 --set model.init=llmc:gpt.bin
# shellcheck disable=SC2086
fails 3 "header field maxT = 128, but model.context needs at least 256" "$DDPTOK" "$G" parity $small --set model.context=256 --set model.init=llmc:gpt.bin
# shellcheck disable=SC2086
fails 3 "header field V = 512, but data.vocab needs at least 600" "$DDPTOK" "$G" parity $small --set data.vocab=600 --set model.init=llmc:gpt.bin
# shellcheck disable=SC2086
fails 3 "expected llmc:FILE" "$DDPTOK" "$G" parity $small --set model.init=gpt.bin
fails 3 "model.kind = window_mlp" "$DDPTOK" "$CONF/minimum.ini" parity --set model.init=llmc:gpt.bin

# export: a window_mlp checkpoint is refused naming its model.kind; a failed write leaves nothing
"$DDPTOK" "$CONF/minimum.ini" train --continuous --set train.updates=2 --set run.artifacts=mlp --set run.outputs=mlp-out > /dev/null
fails 5 "export: checkpoint .* holds a model of kind window_mlp" "$DDPTOK" "$CONF/minimum.ini" export --llmc mlp.bin --set run.artifacts=mlp --set run.outputs=mlp-out
[ ! -e mlp.bin ]
# shellcheck disable=SC2086
fails 4 "no/such/dir" "$DDPTOK" "$G" export --llmc no/such/dir/x.bin $small
# shellcheck disable=SC2086
fails 2 "give the file to write with --llmc FILE or the directory with --hf DIR" "$DDPTOK" "$G" export $small
echo "llmc: ok"
