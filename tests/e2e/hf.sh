# Hugging Face interoperability: `export --hf DIR` writes a gpt checkpoint as a GPT-2
# directory (config.json, model.safetensors: names, shapes, the Conv1D weights stored
# transposed), `model.init = hf:DIR` starts a run from it bit for bit (parity --dump's
# params.npy holds the initial parameters), and from F16 and BF16 copies (names without
# the transformer. prefix, lm_head and attention-mask tensors ignored) as their values
# converted to float32, saying so; a directory of another shape and a damaged file are
# refused naming the file, the key or tensor and the setting.
set -eu
py() { python3 "$E2E/hf-check.py" "$@"; }
. "$E2E/fails.sh"
G="$CONF/gpt-tiny.ini"
small="--set model.layers=2 --set model.width=32 --set data.train=32 --set train.updates=2
	--set devices.world=1"
# shellcheck disable=SC2086 # the word splitting of $small is wanted
timeout 300 "$DDPTOK" "$G" train --continuous $small > train.txt
ck=artifacts/gpt-tiny/runs/$(readlink artifacts/gpt-tiny/runs/latest)/step-0002
# shellcheck disable=SC2086
timeout 300 "$DDPTOK" "$G" export --hf gpt2 $small > export.txt
grep -q "^export: checkpoint .* written to gpt2: Hugging Face GPT-2 directory" export.txt
[ "$(py layout gpt2 "$ck/params.npy" 2 32 512 128)" = ok ] || { py layout gpt2 "$ck/params.npy" 2 32 512 128; exit 1; }
# shellcheck disable=SC2086
timeout 300 "$DDPTOK" "$G" parity --dump loaded $small --set model.init=hf:gpt2 > /dev/null
cmp loaded/params.npy "$ck/params.npy" || { echo "FAIL: hf:gpt2 did not load the checkpoint"; exit 1; }
for dtype in F16 BF16; do
	py convert gpt2 "$dtype" "$dtype"
	# shellcheck disable=SC2086
	timeout 300 "$DDPTOK" "$G" parity --dump "l-$dtype" $small --set model.init="hf:$dtype" > "$dtype.txt"
	grep -q "model.init: hf:$dtype holds $dtype weights: converted to float32" "$dtype.txt" ||
		{ cat "$dtype.txt"; echo "FAIL: the conversion is not said"; exit 1; }
	[ "$(py rounded "l-$dtype/params.npy" "$ck/params.npy" "$dtype")" = equal ] ||
		{ echo "FAIL: $dtype values"; exit 1; }
done
# another shape: exit 3 naming config.json, its key and the setting
# shellcheck disable=SC2086
fails 3 "gpt2/config.json: \"n_layer\" = 2, but model.layers needs 3" "$DDPTOK" "$G" parity $small \
	--set model.layers=3 --set model.init=hf:gpt2
# damaged: exit 5 naming the file and the tensor
mkdir cut && cp gpt2/config.json cut/ && head -c 5000 gpt2/model.safetensors > cut/model.safetensors
# shellcheck disable=SC2086
fails 5 "cut/model.safetensors: tensor .*data_offsets do not hold" "$DDPTOK" "$G" parity $small --set model.init=hf:cut
mkdir bad && cp gpt2/config.json bad/ && printf 'not safetensors' > bad/model.safetensors
# shellcheck disable=SC2086
fails 5 "bad/model.safetensors: not a safetensors file" "$DDPTOK" "$G" parity $small --set model.init=hf:bad
# shellcheck disable=SC2086
fails 2 "give the file to write with --llmc FILE or the directory with --hf DIR" "$DDPTOK" "$G" export $small
echo "hf: ok"
