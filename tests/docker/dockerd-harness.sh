#!/bin/sh
# dockerd-harness.sh start | stop DIR - a private Docker daemon for the
# docker suites: its own data root, exec root, socket and pidfile under a
# new directory in /tmp, no bridge and no iptables rules (so it never
# touches another daemon's network), runsc registered as a runtime when
# it is installed (--network=none, --platform=ptrace: what runs here), and
# the test image sandgate-test:1 imported from tests/docker/rootfs.sh (with
# runsc, also sandgate-test-gvisor:1: that image with statx-shim.c).
#
# start prints shell assignments (DOCKER_DIR, DOCKER_HOST, DOCKER_RUNSC=1
# when runsc is registered); stop DIR stops that daemon (SIGTERM, then
# SIGKILL after 20 s) and removes its directory.  Exit 77 when dockerd or
# root is missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}

stop() {
	d=$1
	[ -f "$d/pid" ] && pid=$(cat "$d/pid") && kill "$pid" 2>/dev/null && {
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
		kill -9 "$pid" 2>/dev/null || true
	}
	# Mounts left by a killed daemon would keep rm from the directory.
	grep -o " $d/[^ ]*" /proc/self/mounts 2>/dev/null | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$d"
}

case "$cmd" in
start)
	command -v dockerd >/dev/null || { echo "dockerd-harness: dockerd is not installed" >&2; exit 77; }
	command -v docker >/dev/null || { echo "dockerd-harness: the docker client is not installed" >&2; exit 77; }
	[ "$(id -u)" -eq 0 ] || { echo "dockerd-harness: dockerd needs root here" >&2; exit 77; }
	d=$(mktemp -d /tmp/sgdk.XXXXXX)
	runsc=$(command -v runsc || true)
	if [ -n "$runsc" ]; then
		printf '{"runtimes":{"runsc":{"path":"%s","runtimeArgs":["--network=none","--platform=ptrace"]}}}\n' "$runsc" >"$d/daemon.json"
	else
		echo '{}' >"$d/daemon.json"
	fi
	dockerd --config-file "$d/daemon.json" --data-root "$d/root" --exec-root "$d/exec" \
		--host "unix://$d/docker.sock" --pidfile "$d/pid" --bridge=none --iptables=false \
		--ip-masq=false --ip-forward=false >"$d/log" 2>&1 &
	export DOCKER_HOST="unix://$d/docker.sock"
	i=0
	until docker version >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 300 ]; then
			echo "dockerd-harness: dockerd did not start" >&2
			tail -20 "$d/log" >&2
			stop "$d"
			exit 1
		fi
		sleep 0.1
	done
	sh "$here/rootfs.sh" "$d/rootfs.tar" >&2
	docker import "$d/rootfs.tar" sandgate-test:1 >/dev/null
	# gVisor's image: the same, and statx-shim.c preloaded (its comment
	# says what Debian's runsc refuses and why dropping the flag is safe).
	if [ -n "$runsc" ] && command -v cc >/dev/null; then
		mkdir -p "$d/shim/usr/lib" "$d/shim/etc"
		cc -shared -fPIC -O2 -o "$d/shim/usr/lib/libsg-statx.so" "$here/statx-shim.c"
		echo /usr/lib/libsg-statx.so >"$d/shim/etc/ld.so.preload"
		tar -C "$d/shim" -rf "$d/rootfs.tar" ./usr/lib/libsg-statx.so ./etc/ld.so.preload
		docker import "$d/rootfs.tar" sandgate-test-gvisor:1 >/dev/null
		rm -rf "$d/shim"
	fi
	rm -f "$d/rootfs.tar"
	echo "DOCKER_DIR=$d"
	echo "DOCKER_HOST=unix://$d/docker.sock"
	[ -n "$runsc" ] && echo "DOCKER_RUNSC=1"
	exit 0
	;;
stop)
	stop "$2"
	;;
*)
	echo "usage: dockerd-harness.sh start | stop DIR" >&2
	exit 2
	;;
esac
