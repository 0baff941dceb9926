#!/usr/bin/env python3
"""Copies SOURCE to OUTPUT with the text FROM replaced by TO (a planted fault).

FROM must occur exactly once: a fault whose code moved is an error here, never a check
that silently stopped testing anything."""
import sys

src, out, old, new = sys.argv[1:5]
old = old.replace("\\n", "\n").replace("\\t", "\t")
new = new.replace("\\n", "\n").replace("\\t", "\t")
text = open(src).read()
if text.count(old) != 1:
    sys.exit(f"plant-fault: {src}: {old!r} occurs {text.count(old)} times, not once")
open(out, "w").write(text.replace(old, new))
