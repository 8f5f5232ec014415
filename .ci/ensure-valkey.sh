#!/usr/bin/env bash
# Make sure a valkey-server binary is available for the Valkey pass of
# `make test` (the tests start their own loopback servers; no system
# service is needed). Installs Debian's valkey-server with apt-get when
# running as root or with passwordless sudo. On Debian 12 (bookworm)
# Valkey is only in bookworm-backports: this adds a sources entry for
# that suite, on the mirror that the machine's own entry for bookworm
# uses, and installs from it.
set -euo pipefail

find_valkey() {
	local p
	if p=$(command -v valkey-server 2>/dev/null); then
		echo "$p"
		return 0
	fi
	for p in /usr/bin/valkey-server /usr/sbin/valkey-server; do
		if [[ -x $p ]]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

if bin=$(find_valkey); then
	echo "valkey-server: $bin ($("$bin" --version))"
	exit 0
fi

fail() {
	cat >&2 <<-MSG
	ensure-valkey: valkey-server not found and could not be installed automatically ($1).
	Install it, then re-run:
	  Debian 12:     add bookworm-backports to the apt sources, then
	                 sudo apt-get install -t bookworm-backports valkey-server
	  Debian 13+:    sudo apt-get install valkey-server
	  macOS:         brew install valkey
	  otherwise:     put a valkey-server binary (Valkey >= 7.2) on PATH,
	                 or skip the Valkey pass: make test VALKEY=0
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

# candidate prints the version apt would install of valkey-server, or
# nothing when no configured suite has it.
candidate() {
	apt-cache policy valkey-server 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" { print $2 }'
}

# mirror prints the URI of the machine's own sources entry for suite $1
# (deb822 .sources files and one-line .list files alike).
mirror() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[[ -r $f ]] || continue
		if [[ $f == *.sources ]]; then
			# deb822: paragraphs separated by blank lines.
			awk -v s="$1" 'BEGIN { RS = ""; FS = "\n" }
				{ uri = ""; hit = 0; deb = 0
				  for (i = 1; i <= NF; i++) {
					if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); uri = a[2] }
					if ($i ~ /^Types:/ && $i ~ /[ \t]deb([ \t]|$)/) deb = 1
					if ($i ~ /^Suites:/) { n = split($i, a, /[ \t]+/); for (j = 2; j <= n; j++) if (a[j] == s) hit = 1 }
					if ($i ~ /^Enabled:[ \t]*no/) deb = 0
				  }
				  if (hit && deb && uri != "") { print uri; exit } }' "$f"
		else
			awk -v s="$1" '$1 == "deb" { i = 2; if ($i ~ /^\[/) while ($i !~ /\]$/) i++; if ($i ~ /^\[/ || $i ~ /\]$/) i++; if ($(i + 1) == s) { print $i; exit } }' "$f"
		fi
	done | head -n 1
}

echo "ensure-valkey: installing valkey-server with apt-get ..."
"${SUDO[@]}" apt-get update -q || fail "apt-get update failed"
target=()
if [[ -z $(candidate) ]]; then
	# shellcheck disable=SC1091
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[[ -n $codename ]] || fail "no valkey-server in the apt sources, and no VERSION_CODENAME in /etc/os-release"
	uri=$(mirror "$codename")
	[[ -n $uri ]] || fail "no valkey-server in the apt sources, and no sources entry for $codename to take the mirror from"
	keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	echo "ensure-valkey: adding $codename-backports from $uri"
	{
		echo "Types: deb"
		echo "URIs: $uri"
		echo "Suites: $codename-backports"
		echo "Components: main"
		if [[ -r $keyring ]]; then
			echo "Signed-By: $keyring"
		fi
	} | "${SUDO[@]}" tee "/etc/apt/sources.list.d/$codename-backports.sources" >/dev/null ||
		fail "could not write /etc/apt/sources.list.d/$codename-backports.sources"
	"${SUDO[@]}" apt-get update -q || fail "apt-get update failed after adding $codename-backports"
	[[ -n $(candidate) ]] || fail "$codename-backports on $uri has no valkey-server"
	target=(-t "$codename-backports")
fi
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends "${target[@]}" valkey-server || fail "apt-get install failed"

# The package may start a system valkey on port 6379; the tests don't use it.
if command -v systemctl >/dev/null 2>&1; then
	"${SUDO[@]}" systemctl stop valkey-server >/dev/null 2>&1 || true
	"${SUDO[@]}" systemctl disable valkey-server >/dev/null 2>&1 || true
fi
if command -v service >/dev/null 2>&1; then
	"${SUDO[@]}" service valkey-server stop >/dev/null 2>&1 || true
fi

bin=$(find_valkey) || fail "valkey-server still not found after apt-get install"
echo "valkey-server: $bin ($("$bin" --version))"
