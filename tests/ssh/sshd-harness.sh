#!/bin/sh
# sshd-harness.sh - a real OpenSSH server on 127.0.0.1 for the ssh adapter's
# tests, and a sandgate config that points at it.
#
#   sshd-harness.sh start [DIR]   start sshd; print shell assignments
#   sshd-harness.sh stop DIR      stop it (and every session it serves),
#                                 then remove DIR
#   sshd-harness.sh kill DIR      kill every sshd process of it (listener,
#                                 connections) but not the commands they
#                                 started, and keep DIR: a host whose
#                                 network went away
#
# start makes DIR (a fresh directory under /var/tmp, or $SG_SSHD_BASE, when
# none is given: never under /tmp, see below) with a
# generated host key, a generated client key authorised for the current
# user, an sshd_config (127.0.0.1 only, a free port, keys only, UsePAM no,
# StrictModes no), a known_hosts file holding the host key, and config.json
# with one profile, `ssh`, on the ssh backend.  Then it starts
# /usr/sbin/sshd -D in the background as the current user (root in CI: it
# may then log in as root; anyone else may only log in as themselves) and
# waits until it listens.  On stdout it prints, one per line:
#
#   SSHD_PID=...  SSHD_PORT=...  SSHD_DIR=...  SSHD_USER=...  SSHD_HOME=...
#   SSHD_KEY=...  SSHD_KNOWN_HOSTS=...  SSHD_WORKSPACE=...
#   SANDGATE_TEST_CONFIG=...  SANDGATE_TEST_PROFILE=ssh
#
# so `eval "$(tests/ssh/sshd-harness.sh start)"` sets them.  Values are
# paths made by this script (no spaces unless DIR has them; they are
# single-quoted either way).  Diagnostics go to stderr; sshd logs to
# DIR/sshd.log.  Exit status 77 means sshd is not installed (a test should
# skip), anything else non-zero a real failure.
set -eu

SSHD=${SSHD:-/usr/sbin/sshd}

die() {
	echo "sshd-harness: $*" >&2
	exit 1
}

quote() {
	# One shell word, single-quoted.
	printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# Every process below pid $1, deepest first, then $1 itself.
descendants() {
	for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
		descendants "$c"
	done
	echo "$1"
}

stop_sshd() {
	dir=$1 what=$2
	[ -f "$dir/sshd.pid" ] || return 0
	pid=$(cat "$dir/sshd.pid")
	# Only a process that is still our sshd (its command line names our
	# config) is signalled: the pid may have been reused.
	if [ -r "/proc/$pid/cmdline" ] &&
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$dir/sshd_config"; then
		victims=
		for p in $(descendants "$pid"); do
			if [ "$what" = all ] || [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sshd ]; then
				victims="$victims $p"
			fi
		done
		kill -KILL $victims 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
	fi
	rm -f "$dir/sshd.pid"
}

start() {
	[ -x "$SSHD" ] || {
		echo "sshd-harness: $SSHD is not installed (apt-get install openssh-server)" >&2
		exit 77
	}
	if [ $# -ge 1 ]; then
		dir=$1
		mkdir -p "$dir"
	else
		# Not under /tmp (nor $TMPDIR, often /tmp): the ssh backend shows
		# each environment's own directory on /tmp, which it cannot do
		# for an environment that itself lives under /tmp (docs/ssh.md),
		# and the tests check that private /tmp.
		base=${SG_SSHD_BASE:-/var/tmp}
		dir=$(mktemp -d "$base/sg-sshd.XXXXXX")
	fi
	dir=$(cd "$dir" && pwd -P)
	chmod 700 "$dir"
	user=$(id -un)
	home=$(cd ~ && pwd -P)

	# sshd running as root wants its privilege-separation directory.
	if [ "$(id -u)" -eq 0 ] && [ ! -d /run/sshd ]; then
		mkdir -p /run/sshd
		chmod 755 /run/sshd
	fi

	rm -f "$dir/host_ed25519" "$dir/host_ed25519.pub" "$dir/client_ed25519" \
		"$dir/client_ed25519.pub"
	ssh-keygen -q -t ed25519 -N '' -C sg-test-host -f "$dir/host_ed25519" >/dev/null
	ssh-keygen -q -t ed25519 -N '' -C sg-test-client -f "$dir/client_ed25519" >/dev/null
	cp "$dir/client_ed25519.pub" "$dir/authorized_keys"
	chmod 600 "$dir/authorized_keys"
	mkdir -p "$dir/remote"

	# A free port: sshd itself tries to bind; a port someone else holds
	# makes it exit at once, and another one is tried.
	tries=0
	while :; do
		tries=$((tries + 1))
		[ $tries -le 20 ] || die "no free port found for sshd (see $dir/sshd.log)"
		port=$(( (($$ + tries * 7919 + $(date +%N | sed 's/^0*//;s/^$/0/')) % 30000) + 20000 ))
		cat >"$dir/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_ed25519
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
AllowUsers $user
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PermitUserEnvironment no
AcceptEnv none
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
PrintLastLog no
MaxSessions 64
MaxStartups 64
LogLevel VERBOSE
# bash sources ~/.bashrc for a command run by sshd unless SHLVL is set
# (Debian's SSH_SOURCE_BASHRC); the test account's rc files are not what
# is tested, and can cost a slow second per call.
SetEnv SHLVL=1
EOF
		rm -f "$dir/sshd.pid" "$dir/sshd.log"
		# Its own session: whoever ran this script may kill its process
		# group when the script exits.  (In a background job setsid does
		# not fork, so $! stays sshd's pid.)
		setsid "$SSHD" -D -f "$dir/sshd_config" -E "$dir/sshd.log" </dev/null >/dev/null 2>&1 &
		pid=$!
		i=0
		while [ $i -lt 100 ]; do
			if grep -q "Server listening on 127.0.0.1 port $port" "$dir/sshd.log" 2>/dev/null; then
				break 2
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
			i=$((i + 1))
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		if ! grep -q "Address already in use" "$dir/sshd.log" 2>/dev/null; then
			cat "$dir/sshd.log" >&2 2>/dev/null || true
			die "sshd did not start (log above)"
		fi
	done
	# -D does not write the pid file before it listens on every system.
	echo "$pid" >"$dir/sshd.pid"

	printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$dir/host_ed25519.pub")" \
		>"$dir/known_hosts"
	cat >"$dir/config.json" <<EOF
{
  "default": "ssh",
  "profiles": {
    "ssh": {
      "backend": "ssh",
      "host": "127.0.0.1",
      "port": $port,
      "user": "$user",
      "identity_file": "$dir/client_ed25519",
      "known_hosts_file": "$dir/known_hosts",
      "workspace": "$dir/remote"
    }
  }
}
EOF
	for kv in "SSHD_PID=$pid" "SSHD_PORT=$port" "SSHD_DIR=$dir" "SSHD_USER=$user" \
		"SSHD_HOME=$home" "SSHD_KEY=$dir/client_ed25519" \
		"SSHD_KNOWN_HOSTS=$dir/known_hosts" "SSHD_WORKSPACE=$dir/remote" \
		"SANDGATE_TEST_CONFIG=$dir/config.json" "SANDGATE_TEST_PROFILE=ssh"; do
		printf '%s=%s\n' "${kv%%=*}" "$(quote "${kv#*=}")"
	done
}

case "${1:-}" in
start)
	shift
	start "$@"
	;;
stop | kill)
	[ $# -eq 2 ] || die "usage: $0 $1 DIR"
	[ -f "$2/sshd_config" ] || die "$2 is not a harness directory"
	if [ "$1" = stop ]; then
		stop_sshd "$2" all
		rm -rf "$2"
	else
		stop_sshd "$2" sshd
	fi
	;;
*)
	echo "usage: $0 start [DIR] | stop DIR | kill DIR" >&2
	exit 2
	;;
esac
