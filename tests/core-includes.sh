#!/bin/sh
# The core knows no command line: no file of the core (the sources of core_sources in
# src/meson.build, and every header that does not belong to a CLI source) includes a
# header of the CLI (the header beside each source of cli_sources).
# Usage: core-includes.sh SRC_DIR   (exit 0: clean; 1: a core file includes a CLI header)
set -eu
src=$1
# the quoted file names of the files( ... ) list assigned to $1 in src/meson.build
list() {
	sed -n "/^$1 = files(/,/)/p" "$src/meson.build" | sed -n "s/^ *'\([^']*\)',*$/\1/p"
}
core=$(list core_sources)
cli=$(list cli_sources)
[ -n "$core" ] && [ -n "$cli" ] || { echo "no core_sources / cli_sources in $src/meson.build"; exit 2; }
cli_headers=
for f in $cli; do
	h=${f%.c}.h
	[ -f "$src/$h" ] && cli_headers="$cli_headers $h"
done
[ -n "$cli_headers" ] || { echo "the CLI has no header in $src"; exit 2; }
core_files=$core
for h in "$src"/*.h; do
	h=$(basename "$h")
	case " $cli_headers " in *" $h "*) ;; *) core_files="$core_files $h" ;; esac
done
bad=0
for f in $core_files; do
	for h in $cli_headers; do
		if grep -n "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]$h[\">]" "$src/$f"; then
			echo "core file src/$f includes the CLI header $h"
			bad=1
		fi
	done
done
[ "$bad" -eq 0 ] && echo "core files: $(echo $core_files | wc -w), none includes a CLI header ($cli_headers )"
exit "$bad"
