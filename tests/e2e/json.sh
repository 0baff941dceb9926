# Assertions on the JSON files the program writes, for the end-to-end scripts (sourced;
# run-e2e.sh exports E2E, this directory). Needs python3 (tools/setup.sh installs it).
#
#   jcheck FILE EXPR   succeeds when the Python expression EXPR is true of the document `d`;
#                      mode(NAME) is the parity entry of that normalization (in parity.json
#                      or in report.json's "parity"). On failure it prints the expression.
#   jget FILE EXPR     prints the value of EXPR (strings bare, anything else as JSON)

json_eval() { # json_eval check|get FILE EXPR
	python3 - "$@" <<'PY'
import json, sys
what, path, expr = sys.argv[1:4]
with open(path, encoding="utf-8") as f:
    d = json.load(f)
def mode(name):
    return next(m for m in d.get("parity", d)["modes"] if m["normalization"] == name)
v = eval("(" + expr + "\n)", {"d": d, "mode": mode})  # parentheses: EXPR may span lines
if what == "get":
    print(v if isinstance(v, str) else json.dumps(v))
elif not v:
    sys.exit("jcheck: %s: not true: %s" % (path, expr))
PY
}

jcheck() { json_eval check "$1" "$2"; }
jget() { json_eval get "$1" "$2"; }
