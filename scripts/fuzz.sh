#!/usr/bin/env bash
# Runs one fuzzer for a time: scripts/fuzz.sh PKG NAME FUZZTIME (make test-fuzz).
#
# Go 1.26's fuzzing coordinator can fail a target with a bare "context deadline exceeded" at
# the -fuzztime boundary when a worker is mid-input as the deadline fires (go.dev/issue/75804,
# fixed in Go 1.27), writing no failing input. Such a run is retried once; a failure that
# writes an input under testdata/fuzz, or any other failure, fails at once.
set -uo pipefail
if [ $# -ne 3 ]; then
	echo "usage: scripts/fuzz.sh PKG NAME FUZZTIME (PKG a folder of the module root, such as ./ptx; FUZZTIME as go test -fuzztime takes it, such as 30s); got $# argument(s)" >&2
	exit 2
fi
pkg=$1 name=$2 fuzztime=$3
cd "$(dirname "$0")/.." || exit 2 # PKG (./ptx) is a folder of the module root, wherever this is called from
dir="$pkg/testdata/fuzz/$name"
before=$(ls "$dir" 2>/dev/null | sort)
for try in 1 2; do
	out=$(CGO_ENABLED=0 ${GO:-go} test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "$pkg" 2>&1)
	rc=$?
	echo "$out"
	[ $rc = 0 ] && exit 0
	after=$(ls "$dir" 2>/dev/null | sort)
	if [ "$before" != "$after" ] || ! grep -q "context deadline exceeded" <<<"$out" || [ "$(grep -c -- '--- FAIL' <<<"$out")" != 1 ]; then
		exit $rc # a real finding, or another failure
	fi
	echo "fuzz $pkg $name: the Go fuzzing coordinator's deadline race (go.dev/issue/75804), no input written; try $try of 2"
done
exit 1
