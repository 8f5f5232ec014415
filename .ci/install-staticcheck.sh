#!/usr/bin/env bash
# Usage: install-staticcheck.sh DEST PKG@VERSION
# Builds staticcheck into DEST. From the module cache alone when it
# holds the version (no network); else from the Go module proxy, tried
# three times: one dropped TLS handshake must not fail a test run.
set -uo pipefail
dest=$1 pkg=$2
go=${GO:-go}
gobin=$(dirname "$dest")/.staticcheck
for try in offline 1 2 3; do
	if [[ $try == offline ]]; then
		GOPROXY=off GOBIN=$gobin $go install "$pkg" 2>/dev/null && break
	else
		GOBIN=$gobin $go install "$pkg" && break
		if [[ $try == 3 ]]; then
			echo "staticcheck: go install $pkg failed three times" >&2
			exit 1
		fi
		sleep $((try * 10))
	fi
done
mv "$gobin/staticcheck" "$dest" && rmdir "$gobin"
