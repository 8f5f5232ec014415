#!/usr/bin/env bash
# Make sure a redis-server binary is available for the tests (they start their
# own loopback servers; no system service is needed). Installs Debian's
# redis-server with apt-get when running as root or with passwordless sudo.
set -euo pipefail

find_redis() {
	local p
	if p=$(command -v redis-server 2>/dev/null); then
		echo "$p"
		return 0
	fi
	for p in /usr/bin/redis-server /usr/sbin/redis-server; do
		if [[ -x $p ]]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

if bin=$(find_redis); then
	echo "redis-server: $bin ($("$bin" --version))"
	exit 0
fi

fail() {
	cat >&2 <<-MSG
	ensure-redis: redis-server not found and could not be installed automatically ($1).
	Install it, then re-run:
	  Debian/Ubuntu: sudo apt-get install redis-server
	  macOS:         brew install redis
	  otherwise:     put a redis-server binary (Redis >= 6.2) on PATH
	MSG
	exit 1
}

command -v apt-get >/dev/null 2>&1 || fail "apt-get is not available"
if [[ $(id -u) -eq 0 ]]; then
	SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	SUDO=(sudo -n)
else
	fail "not root and passwordless sudo is not available"
fi

echo "ensure-redis: installing redis-server with apt-get ..."
"${SUDO[@]}" apt-get update -q || fail "apt-get update failed"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends redis-server || fail "apt-get install failed"

# The package may start a system redis on port 6379; the tests don't use it.
if command -v systemctl >/dev/null 2>&1; then
	"${SUDO[@]}" systemctl stop redis-server >/dev/null 2>&1 || true
	"${SUDO[@]}" systemctl disable redis-server >/dev/null 2>&1 || true
fi
if command -v service >/dev/null 2>&1; then
	"${SUDO[@]}" service redis-server stop >/dev/null 2>&1 || true
fi

bin=$(find_redis) || fail "redis-server still not found after apt-get install"
echo "redis-server: $bin ($("$bin" --version))"
