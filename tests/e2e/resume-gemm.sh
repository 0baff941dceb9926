# One GEMM implementation per run: a checkpoint records the cpu backend's GEMM
# (state.json "gemm"), a resume under another one is refused naming both (exit 5), and
# --allow-gemm-change goes on, recording the change in the checkpoints' history. Needs
# both implementations: skipped (exit 77) in a build without oneDNN.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
T="$CONF/tiny.ini"
run() { "$DDPTOK" "$T" "$@" --set devices.backend=cpu; }
latest() { echo "artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)"; }
run env > env.out || fail "env: $(cat env.out)"
if grep -q "oneDNN is not built in" env.out; then
	echo "SKIP: this build has no oneDNN"
	exit 77
fi

run train --set devices.gemm=openblas > first.out || fail "train: $(cat first.out)"
A=$(latest)
grep -q '"gemm": "openblas"' "$A/step-0006/state.json" ||
	fail "the checkpoint does not record its GEMM: $(cat "$A/step-0006/state.json")"

set +e
run train --resume latest --set devices.gemm=onednn --set train.updates=8 > refused.out 2>&1
rc=$?
set -e
[ "$rc" -eq 5 ] || fail "a resume under another GEMM: exit $rc: $(cat refused.out)"
grep -q "was trained with the openblas GEMM and this run would use onednn" refused.out ||
	fail "the refusal does not name both: $(cat refused.out)"
[ ! -d "$A/step-0008" ] || fail "the refused resume wrote a checkpoint"

# the same implementation goes on silently
run train --resume latest --set devices.gemm=openblas --set train.updates=7 > same.out ||
	fail "a resume under the same GEMM: $(cat same.out)"
if grep -q "devices.gemm" same.out; then fail "the same GEMM was taken for a change"; fi

run train --resume latest --set devices.gemm=onednn --set train.updates=8 \
	--allow-gemm-change > allowed.out || fail "--allow-gemm-change: $(cat allowed.out)"
grep -q "^train: devices.gemm: openblas -> onednn from step 7" allowed.out ||
	fail "the change is not said: $(cat allowed.out)"
grep -q '"gemm": "onednn"' "$A/step-0008/state.json" ||
	fail "the new checkpoint does not record onednn"
grep -q '"key": "devices.gemm"' "$A/step-0008/state.json" ||
	fail "the change is not in the checkpoint's history: $(cat "$A/step-0008/state.json")"
echo "resume-gemm: ok"
