# Several processes under mpirun (Open MPI, --oversubscribe on one machine, CPU backend):
# parity with every negative control caught; training with P processes x L ranks gives the
# bits of one process with W = P x L ranks (default and exact mode, and with the optimizer
# state sharded over the processes); a checkpoint written by one layout resumes on another
# and ends bit for bit where the continuous run ends (read by process 0 alone: process 1
# runs elsewhere); a
# failure on a rank of process 1, process 1 killed or stuck, and SIGTERM to process 0 only
# end every process promptly with the right status and message; differing data refused;
# evaluate reads process 0's checkpoint on every process and reports once; the protocol gives
# the one process's report, on one engine per process; inspect, clean and bench (commands of
# one process) refused by every process.
# Skips (77) without mpirun or in a build without MPI.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
command -v mpirun > /dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
T="$CONF/tiny.ini"
"$DDPTOK" "$T" env --set devices.backend=cpu | grep -q "^mpi: built" ||
	{ echo "SKIP: built without MPI"; exit 77; }
# Open MPI refuses to run as root unless told twice; only this test's processes are told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_plm_rsh_agent=false # one machine, no network
S="--set devices.backend=cpu"
# mpirun on this machine; in a sanitizer build without leak detection: the Open MPI runtime
# leaves allocations of the components it unloads (memory errors are still checked)
NO_LEAKS="${ASAN_OPTIONS:-}:detect_leaks=0"
mpirun_() { ASAN_OPTIONS="$NO_LEAKS" mpirun --oversubscribe "$@"; }
# mpi NP ARGS...: the binary on NP processes of this machine
mpi() { np=$1; shift; mpirun_ -np "$np" "$DDPTOK" "$T" "$@"; }
# rc_of CMD...: runs it, its exit status in $rc, output in cmd.out / cmd.err
rc_of() { set +e; "$@" > cmd.out 2> cmd.err; rc=$?; set -e; }
same() { # same DIR1 DIR2: the checkpoints hold the same parameters and momentum
	for f in params.npy momentum.npy; do
		cmp "$1/$f" "$2/$f" || fail "$f of $1 differs from $2's"
	done
}

# env: P, L, W and the hosts of every process
mpi 2 env $S --set devices.world=4 > env.out
grep -q "^processes: P = 2 x L = 2 = W = 4 ranks; this is process 1, ranks 2..3; hosts: " env.out ||
	fail "env: $(cat env.out)"

# three processes for a configuration of two ranks: the process count is named, with the
# counts that fit (not the devices.local = 0 that stands for "world / processes"); every
# process refuses alike and says so, none ends the others with an abort
rc_of mpi 3 train $S --set run.artifacts=three --set run.outputs=three
[ "$rc" -eq 3 ] && grep -q "devices.world = 2 ranks cannot be shared evenly by 3 processes .*start 1 or 2 processes" cmd.err ||
	fail "3 processes for W = 2 gave exit $rc: $(cat cmd.err)"
[ "$(grep -c "^ddptok-run: process [012] .*cannot be shared evenly" cmd.err)" -eq 3 ] &&
	! grep -q MPI_ABORT cmd.err || fail "3 processes for W = 2: not each process's own refusal: $(cat cmd.err)"

# parity with P = 2 x L = 1: the one-process verdicts and numbers, controls caught
# shellcheck disable=SC2086
"$DDPTOK" "$T" parity $S --set run.outputs=one > /dev/null
# shellcheck disable=SC2086
mpi 2 parity $S --set run.outputs=two > parity.out || { cat parity.out; fail "parity P=2"; }
cmp one/parity.json two/parity.json || fail "parity.json of P = 2 differs from P = 1's"
# process 0 prints, naming the log of process 1, which holds what process 1 found
grep -q "^log: process 1 writes its log to two/process-1/log.txt$" parity.out ||
	fail "process 1's log not named: $(cat parity.out)"
[ "$(grep -c 'fail (caught)' parity.out)" -eq 3 ] || fail "negative controls: $(cat parity.out)"
[ "$(grep -c 'fail (caught)' two/process-1/log.txt)" -eq 3 ] ||
	fail "negative controls of process 1: $(cat two/process-1/log.txt)"

# training: P = 2 x L = 2 and P = 1 x L = 4 write the same bits (default and exact mode)
for mode in "" "--set train.shards=8"; do
	# shellcheck disable=SC2086
	"$DDPTOK" "$T" train --continuous $S $mode --set devices.world=4 \
		--set run.artifacts=w4 > /dev/null
	# shellcheck disable=SC2086
	mpi 2 train --continuous $S $mode --set devices.world=4 --set run.artifacts=p2 > p2.out
	same w4/runs/latest/step-0006 p2/runs/latest/step-0006
	for out in p2.out outputs/tiny/process-1/log.txt; do
		[ "$(grep -c '^train: collectives: rank [0-3] waited most (' $out)" -eq 1 ] ||
			fail "no line naming the rank that waited most: $(cat $out)"
	done
	[ "$(grep -c '^train: step 6/6 ' p2.out)" -eq 1 ] || fail "progress: $(cat p2.out)"
	[ ! -e p2/process-1 ] || fail "process 1 wrote into the artifacts"
	rm -rf w4 p2
done

# resume across layouts: P = 2 x L = 1 stops at 3, P = 1 x L = 2 resumes; and the reverse
# shellcheck disable=SC2086
"$DDPTOK" "$T" train --continuous $S --set run.artifacts=c > /dev/null
# shellcheck disable=SC2086
mpi 2 train $S --set train.stop_at=3 --set run.artifacts=a > /dev/null
# shellcheck disable=SC2086
"$DDPTOK" "$T" train --resume latest $S --set run.artifacts=a > /dev/null
same a/runs/latest/step-0006 c/runs/latest/step-0006
# shellcheck disable=SC2086
"$DDPTOK" "$T" train $S --set train.stop_at=3 --set run.artifacts=b > /dev/null
# process 1 in another directory: process 0 resolves `latest`, the checkpoint reaches it
mkdir elsewhere
# shellcheck disable=SC2086
mpirun_ -np 1 "$DDPTOK" "$T" train --resume latest $S \
	--set run.artifacts=b : -np 1 -wdir elsewhere "$DDPTOK" "$T" train \
	--resume latest $S --set run.artifacts=b > /dev/null
same b/runs/latest/step-0006 c/runs/latest/step-0006
same b/runs/latest/step-0003 elsewhere/outputs/tiny/process-1/resume/step-0003

# the optimizer state sharded over P = 2 x L = 2 (train.shard_optimizer): the checkpoint
# gathers every process's slices, and a sharded run of two processes resumes unsharded in
# one and the reverse, each ending on the continuous one-process run's bits
Z="--set train.optimizer=adamw --set train.clip=0.05 --set devices.world=4"
SH="--set train.shard_optimizer=true"
# shellcheck disable=SC2086
"$DDPTOK" "$T" train --continuous $S $Z --set run.artifacts=z > /dev/null
# shellcheck disable=SC2086
mpi 2 train $S $Z $SH --set train.stop_at=3 --set run.artifacts=z-p2 > /dev/null
# shellcheck disable=SC2086
"$DDPTOK" "$T" train --resume latest $S $Z --set run.artifacts=z-p2 > /dev/null
# shellcheck disable=SC2086
"$DDPTOK" "$T" train $S $Z --set train.stop_at=3 --set run.artifacts=z-p1 > /dev/null
# shellcheck disable=SC2086
mpi 2 train --resume latest $S $Z $SH --set run.artifacts=z-p1 > /dev/null
for d in z-p2 z-p1; do
	for f in params.npy exp_avg.npy exp_avg_sq.npy; do
		cmp "$d/runs/latest/step-0006/$f" "z/runs/latest/step-0006/$f" ||
			fail "sharded over processes: $f of $d differs"
	done
done

# evaluate: process 0 finds the newest checkpoint and sends it to process 1 (elsewhere,
# without artifacts); one report, the one process's
# shellcheck disable=SC2086
"$DDPTOK" "$T" evaluate $S --set run.artifacts=b --set run.outputs=ev1 > /dev/null
# shellcheck disable=SC2086
mpirun_ -np 1 "$DDPTOK" "$T" evaluate $S --set run.artifacts=b --set run.outputs=ev2 : \
	-np 1 -wdir elsewhere "$DDPTOK" "$T" evaluate $S --set run.artifacts=b \
	--set run.outputs=ev2 > ev.out || fail "evaluate with P = 2"
cmp ev1/evaluate.json ev2/evaluate.json || fail "evaluate.json of P = 2 differs from P = 1's"
[ "$(grep -c '^evaluate: test ' ev.out)" -eq 1 ] || fail "evaluate reported twice: $(cat ev.out)"
[ ! -e elsewhere/ev2/process-1/evaluate.json ] || fail "process 1 wrote evaluate.json"
same b/runs/latest/step-0006 elsewhere/ev2/process-1/evaluate/step-0006
# the protocol with P = 2 x L = 1: each process keeps one engine for every step (they agree
# before each reuse) and the report holds the one process's numbers
mkdir p1 p2
# shellcheck disable=SC2086
(cd p1 && "$DDPTOK" "$T" $S > ../protocol1.out) || { cat protocol1.out; fail "protocol P=1"; }
# shellcheck disable=SC2086
(cd p2 && mpi 2 $S > ../protocol2.out) || { cat protocol2.out; fail "protocol P=2"; }
for out in protocol2.out p2/outputs/tiny/process-1/log.txt; do
	[ "$(grep -c '^engines: 1 created, 8 reuses after a reset' $out)" -eq 1 ] ||
		fail "engines of P = 2: $(grep engines $out)"
done
python3 - p1/outputs/tiny/report.json p2/outputs/tiny/report.json <<'PY' || fail "the protocol's report of P = 2 differs"
import json, sys
def strip(x):  # what a run measures in time differs; every result must not
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("seconds", "tokens_per_s")}
    return [strip(v) for v in x] if isinstance(x, list) else x
a, b = (strip(json.load(open(f))) for f in sys.argv[1:])
sys.exit(0 if a == b and a["ok"] else 1)
PY

# the commands of one process are refused with P > 1 at once, by every process, naming
# the command and why, before they read or write anything (the protocol, train, parity, evaluate and env
# above run over both)
for c in "inspect:it is interactive" \
	"clean --scope all:processes that share a file system would remove the same files" \
	"bench --windows 1:copies of it would share the cores they time"; do
	args=${c%%:*} why=${c#*:}
	# shellcheck disable=SC2086
	rc_of mpi 2 $args $S --set run.artifacts=b --set run.outputs=ev1 < /dev/null
	[ "$rc" -eq 2 ] || { cat cmd.err; fail "$args with P = 2: exit $rc, expected 2"; }
	want="usage error: ${args%% *} runs in one process (here one of 2), since $why: run it"
	[ "$(grep -c "$want without mpirun or srun" cmd.err)" -eq 2 ] ||
		fail "$args with P = 2: $(cat cmd.err)"
done
[ -f b/runs/latest/step-0006/MANIFEST.json ] && [ -f ev1/evaluate.json ] ||
	fail "clean with P = 2 removed files"
[ ! -e ev1/bench.json ] && [ ! -e ev1/process-1 ] || fail "bench with P = 2 wrote something"

# a failure on rank 3 (process 1) at window 2: every process ends, naming it
# shellcheck disable=SC2086
rc_of mpi 2 train --continuous $S --set devices.world=4 --inject-failure 3:2
[ "$rc" -eq 6 ] || { cat cmd.err; fail "injected failure: exit $rc, expected 6"; }
grep -q "process 1 (.*): device error: window 2: rank 3: injected failure" cmd.err ||
	fail "the failure is not named: $(cat cmd.err)"
# after a checkpoint, the failure names it as the state to resume from
# shellcheck disable=SC2086
rc_of mpi 2 train --continuous $S --set train.checkpoint_every=2 --inject-failure 1:4
[ "$rc" -eq 6 ] || { cat cmd.err; fail "injected failure after a checkpoint: exit $rc"; }
grep -q "rank 1: injected failure.*newest checkpoint: artifacts/tiny/runs/[0-9-]*/step-0002, step 2" \
	cmd.err || fail "the newest checkpoint is not named: $(cat cmd.err)"
# the metrics lines (process 0's: the run's one file): every rank's tokens, loss sum and
# time in collectives
[ ! -e outputs/tiny/process-1/train-continuous.jsonl ] || fail "process 1 wrote metrics"
python3 - artifacts/tiny/runs/latest/metrics.jsonl <<'PY' ||
import json, sys
for path in sys.argv[1:]:
    for line in open(path):
        j = json.loads(line)
        assert len(j["rank_tokens"]) == len(j["rank_loss_sum"]) == len(j["rank_seconds_coll"]) == 2, j
        assert abs(sum(j["rank_loss_sum"]) - j["loss"] * j["N"]) < 1e-9 * j["N"], j
PY
	fail "per-rank metrics"

# differing data: refused before the first window, naming the process that differs
# shellcheck disable=SC2086
rc_of mpirun_ -np 1 "$DDPTOK" "$T" train $S --set run.artifacts=d : \
	-np 1 "$DDPTOK" "$T" train $S --set run.artifacts=d --set data.train=65
[ "$rc" -eq 5 ] || { cat cmd.err; fail "differing data: exit $rc, expected 5"; }
grep -q "the data differ between processes: process 1 (" cmd.err || fail "$(cat cmd.err)"
[ -z "$(ls -d d/runs/*/step-* 2> /dev/null)" ] || fail "a checkpoint was written with differing data"

# long runs for the signals: about a thousand windows
L="--set train.updates=3000 --set train.stop_at=2900 --set devices.timeout=3"
# start_long DIR: P = 2 in the background ($mp), $p0 / $p1 its processes once they train
start_long() {
	# shellcheck disable=SC2086
	ASAN_OPTIONS="$NO_LEAKS" mpirun --oversubscribe -np 2 "$DDPTOK" "$T" train $S $L \
		--set run.outputs="$1" \
		--set run.artifacts="$1" > "$1.out" 2> "$1.err" &
	mp=$!
	i=0
	while [ ! -s "$(ls "$1"/runs/*/metrics.jsonl 2> /dev/null | head -1)" ]; do
		i=$((i + 1))
		[ "$i" -lt 600 ] || fail "$1: no window trained"
		sleep 0.05
	done
	p0= p1=
	for c in $(pgrep -P "$mp"); do
		r=$(tr '\0' '\n' < "/proc/$c/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
		[ "$r" = 0 ] && p0=$c
		[ "$r" = 1 ] && p1=$c
	done
	[ -n "$p0" ] && [ -n "$p1" ] || fail "$1: the processes of mpirun $mp not found"
}
# finish: waits for mpirun ($rc, seconds in $took) and checks no process is left
finish() {
	t0=$(date +%s)
	set +e
	wait "$mp"
	rc=$?
	set -e
	took=$(($(date +%s) - t0))
	for q in $p0 $p1; do # a process mpirun reaped is gone at once; allow 2 s anyway
		i=0
		# a zombie has ended: only its exit status waits for whoever reaps it (on a
		# fresh machine, an init process that reaps late)
		while kill -0 "$q" 2> /dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$q/status" 2> /dev/null; do
			i=$((i + 1))
			[ "$i" -lt 40 ] || fail "process $q outlived mpirun: $(cat /proc/$q/status)"
			sleep 0.05
		done
	done
}

echo "mpi: parity, layouts, resume, failure and data checks passed"
# SIGTERM to process 0 only: both stop at the same window, one checkpoint, exit 8
start_long term
kill -TERM "$p0"
finish
[ "$rc" -eq 8 ] || { cat term.err; fail "SIGTERM to process 0: exit $rc, expected 8"; }
[ "$(grep -c 'interrupted by SIGTERM after step' term.err)" -eq 2 ] ||
	fail "both processes must report the interruption: $(cat term.err)"
ck=$(sed -n 's/^ddptok-run: process 0.*continue with --resume \(.*\))$/\1/p' term.err)
[ -f "$ck/MANIFEST.json" ] || fail "no checkpoint named: $(cat term.err)"
grep -q "process 1 .*--resume $ck)" term.err || fail "process 1 names another checkpoint"
steps=$(grep -o 'interrupted by SIGTERM after step [0-9]*' term.err | sort -u)
[ "$(echo "$steps" | wc -l)" -eq 1 ] || fail "the processes stopped at different windows: $steps"

echo "mpi: SIGTERM to process 0 ended both: $steps"
# SIGKILL of process 1: mpirun ends process 0 too
start_long kill
kill -KILL "$p1"
finish
[ "$rc" -ne 0 ] || fail "SIGKILL of process 1: mpirun exited 0"
[ "$took" -le 30 ] || fail "SIGKILL of process 1: the run took $took s to end"

echo "mpi: SIGKILL of process 1 ended the run in $took s"
# process 1 stuck (stopped): process 0 gives up after devices.timeout = 3 s, ending both
start_long stuck
kill -STOP "$p1"
finish
[ "$rc" -eq 6 ] || { cat stuck.err; fail "stuck process 1: exit $rc, expected 6"; }
grep -q "process 0 (.*): .*timed out after 3 s" stuck.err || fail "$(cat stuck.err)"
# the 3 s timeout plus MPI_Abort ends it in 3-4 s on an idle machine; one run on a loaded
# 2-core machine took 16 s: the bound tells an ending run from one left hanging
[ "$took" -le 40 ] || fail "stuck process 1: the run took $took s to end"
echo "mpi: ok"
