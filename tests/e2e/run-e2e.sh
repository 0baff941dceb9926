#!/bin/sh
# Runs one end-to-end test script in a fresh temporary directory.
# usage: run-e2e.sh SCRIPT DDPTOK_RUN CONF_DIR
set -eu
script=$1
DDPTOK=$2
CONF=$3
case "$script" in /*) ;; *) script="$PWD/$script" ;; esac
case "$DDPTOK" in /*) ;; *) DDPTOK="$PWD/$DDPTOK" ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/ddptok-e2e.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
E2E=$(dirname "$script") # helpers beside the scripts (json.sh)
export DDPTOK CONF E2E
sh "$script"
