#!/bin/sh
# rootfs.sh OUT.tar - a small root file system for the docker suites, made
# from this host's own programs (no registry, no debootstrap): sh, bash,
# coreutils, find, grep, sed, awk, git, python3, rg, dmesg (the gVisor
# check), each with the libraries ldd names, and /etc/passwd with nobody.
# `docker import OUT.tar NAME` makes it an image.  Exit 77 when this host
# lacks sh or coreutils.
set -eu
# The distribution's programs, not a version manager's shims.
PATH=/usr/bin:/bin:/usr/sbin:/sbin:$PATH
out=$1
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# The image's / is the tar's "./": mktemp's 0700 would shut every user but
# root out of the whole file system (Podman keeps it; Docker does not).
chmod 755 "$root"
progs="sh bash dash cat ls cp mv rm mkdir rmdir chmod chown ln touch stat head tail cut
sort uniq wc tr tee env id uname sleep true false printf echo test expr date dirname
basename readlink realpath mktemp sha256sum md5sum od base64 kill ps find xargs grep egrep
sed awk gawk mawk tar gzip diff patch file less more which timeout nohup nice git python3
rg dmesg seq du df yes tac nl comm join paste split fold hostname whoami getent stty tty
setsid pkill pgrep nproc printenv truncate mkfifo mknod sync dd ln install shuf"
for p in $progs; do
	# The program, not a shell's builtin of that name (echo, printf, test).
	f=
	for d in /usr/bin /bin /usr/sbin /sbin; do
		[ -x "$d/$p" ] && { f=$d/$p; break; }
	done
	[ -n "$f" ] || continue
	# pyenv shims and the like: the program itself.
	f=$(readlink -f "$f")
	case $f in /usr/*|/bin/*|/lib/*) ;; *) continue ;; esac
	mkdir -p "$root/usr/bin"
	cp -L "$f" "$root/usr/bin/$p"
	ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | while read -r l; do
		[ -e "$root$l" ] || { mkdir -p "$root$(dirname "$l")"; cp -L "$l" "$root$l"; }
	done
done
[ -x "$root/usr/bin/sh" ] && [ -x "$root/usr/bin/cat" ] || { echo "rootfs: no sh or coreutils" >&2; exit 77; }
# The dynamic loader at its usual paths, and the usual links.
for l in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do
	[ -e "$l" ] && { mkdir -p "$root$(dirname "$l")"; cp -L "$l" "$root$l"; }
done
for d in bin sbin lib; do [ -e "$root/$d" ] || ln -s "usr/$d" "$root/$d"; done
mkdir -p "$root/usr/sbin" "$root/usr/lib"
# Python's library and git's helpers, when they are here.
py=$(python3 -c 'import sys; print(sys.prefix + "/lib/python%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
[ -n "$py" ] && [ -d "/usr/lib/${py##*/}" ] && cp -a "/usr/lib/${py##*/}" "$root/usr/lib/" &&
	rm -rf "$root/usr/lib/${py##*/}/test" "$root/usr/lib/${py##*/}"/*/test "$root/usr/lib/${py##*/}/__pycache__"
[ -d /usr/lib/git-core ] && cp -a /usr/lib/git-core "$root/usr/lib/"
[ -d /usr/share/git-core ] && mkdir -p "$root/usr/share" && cp -a /usr/share/git-core "$root/usr/share/"
mkdir -p "$root/etc" "$root/tmp" "$root/var/tmp" "$root/run" "$root/proc" "$root/sys" "$root/dev" "$root/root" \
	"$root/workspace"
# World-writable, as Debian's are: outside the workspace, only the
# permission modes keep a command from writing /var/tmp (test_docker).
chmod 1777 "$root/tmp" "$root/var/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
tar -C "$root" -cf "$out" .
