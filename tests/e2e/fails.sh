# An assertion on a refused command, for the end-to-end scripts (sourced; run-e2e.sh
# exports E2E, this directory).
#
#   fails CODE PATTERN CMD...   CMD must exit CODE with PATTERN (grep) on its stderr; its
#                               output goes to out.txt and err.txt
fails() {
	code=$1 pat=$2
	shift 2
	rc=0
	"$@" > out.txt 2> err.txt || rc=$?
	[ "$rc" = "$code" ] || { cat out.txt err.txt; echo "FAIL: exit $rc, expected $code: $*"; exit 1; }
	grep -q -- "$pat" err.txt || { cat err.txt; echo "FAIL: no '$pat' on stderr: $*"; exit 1; }
}
