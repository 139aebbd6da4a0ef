# Shared prologue of the fakes' run-sdk-check.sh scripts (sourced, not run). The caller has
# cd'ed into its fake's directory (server.mjs, sdk-check.mjs, package-lock.json).
# Provides: fake_npm_ci, fake_modes, the temp dir $work (removed on exit with any fake still
# running), counters with pass_line/fail_line, start_fake/stop_fake/fake_wait_gone (fake_pid,
# port, admin), fake_leftovers, run_check (runs sdk-check.mjs against the running fake and adds
# up its summary), show_fake_stderr, and fake_summary (prints "N passed, M failed", returns
# non-zero on failure).

# Installs the pinned packages (package-lock.json) when they are missing or stale.
fake_npm_ci() {
	if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
		npm ci --no-audit --no-fund --loglevel=error >&2 || return 1
	fi
}

# fake_modes ARGS...: sets the array `modes` to ARGS, or to tmpdir plus bwrap when bubblewrap
# and nsenter work here.
fake_modes() {
	modes=("$@")
	if [ ${#modes[@]} -eq 0 ]; then
		modes=(tmpdir)
		if command -v bwrap >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1 &&
			bwrap --ro-bind / / true 2>/dev/null; then
			modes+=(bwrap)
		else
			echo "# bubblewrap or nsenter unusable here: bwrap mode skipped" >&2
		fi
	fi
}

work="$(mktemp -d)"
fake_pid=""
port=""
admin=""
total_pass=0
total_fail=0

fake_cleanup() {
	exec 7>&- 2>/dev/null
	if [ -n "$fake_pid" ]; then
		kill "$fake_pid" 2>/dev/null
		wait "$fake_pid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap fake_cleanup EXIT INT TERM

pass_line() {
	echo "ok - $1"
	total_pass=$((total_pass + 1))
}

fail_line() {
	echo "not ok - $1"
	total_fail=$((total_fail + 1))
}

# start_fake NAME ARGS...: starts `node server.mjs ARGS` (stdout to $work/NAME.out) and waits
# for its "LISTENING <port>" line (and "ADMIN <port>" too when fake_wait_admin=1); sets fake_pid,
# port and admin. Stdin is /dev/null, or with fake_stdin_fifo=1 a fifo held open on fd 7, so
# that `exec 7>&-` is the fake's stdin EOF.
start_fake() {
	local name="$1"
	shift
	local out="$work/$name.out" in=/dev/null
	: >"$out"
	if [ "${fake_stdin_fifo:-0}" = 1 ]; then
		in="$work/$name.fifo"
		rm -f "$in"
		mkfifo "$in"
	fi
	node server.mjs "$@" >"$out" 2>"$work/$name.err" <"$in" &
	fake_pid=$!
	[ "$in" = /dev/null ] || exec 7>"$in"
	port=""
	admin=""
	for _ in $(seq 1 200); do
		port="$(sed -n 's/^LISTENING \([0-9][0-9]*\)$/\1/p' "$out" 2>/dev/null)"
		admin="$(sed -n 's/^ADMIN \([0-9][0-9]*\)$/\1/p' "$out" 2>/dev/null)"
		if [ -n "$port" ] && { [ "${fake_wait_admin:-0}" != 1 ] || [ -n "$admin" ]; }; then
			return 0
		fi
		kill -0 "$fake_pid" 2>/dev/null || break
		sleep 0.05
	done
	sed 's/^/#   /' "$work/$name.err"
	fake_pid=""
	return 1
}

# fake_wait_gone: after the fake's stdin was closed, waits up to 5 s for it to exit; true if it
# did (fake_pid is then cleared), false (and the fake killed) if not.
fake_wait_gone() {
	local i
	for i in $(seq 1 100); do
		if ! kill -0 "$fake_pid" 2>/dev/null; then
			wait "$fake_pid" 2>/dev/null
			fake_pid=""
			return 0
		fi
		sleep 0.05
	done
	kill "$fake_pid" 2>/dev/null
	wait "$fake_pid" 2>/dev/null
	fake_pid=""
	return 1
}

# fake_leftovers DIR: prints the pids of processes whose command line or cwd is under DIR.
fake_leftovers() {
	local p left
	left="$(pgrep -f -- "$1" | tr '\n' ' ')"
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/cwd" 2>/dev/null)" in "$1"*) left+=" ${p#/proc/}" ;; esac
	done
	echo "$left" | tr -s ' ' | sed 's/^ //; s/ $//'
}

stop_fake() {
	[ -n "$fake_pid" ] || return 0
	kill "$fake_pid" 2>/dev/null
	wait "$fake_pid" 2>/dev/null
	fake_pid=""
}

# run_check NAME ENV...: runs sdk-check.mjs with FAKE_URL and ENV against the running fake.
run_check() {
	local name="$1"
	shift
	env FAKE_URL="http://127.0.0.1:$port" "$@" timeout 300 node sdk-check.mjs \
		>"$work/$name.tap" 2>"$work/$name.check.err"
	local rc=$? summary f=""
	grep -v -E '^[0-9]+ passed, [0-9]+ failed$' "$work/$name.tap"
	summary="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/$name.tap" | tail -n 1)"
	if [ -n "$summary" ]; then
		total_pass=$((total_pass + ${summary%% passed*}))
		f="${summary#*passed, }"
		total_fail=$((total_fail + ${f%% failed}))
	fi
	if [ "$rc" -ne 0 ] && { [ -z "$summary" ] || [ "${f%% failed}" = "0" ]; }; then
		fail_line "[$name] sdk-check.mjs exited $rc"
		sed 's/^/#   /' "$work/$name.check.err" | tail -n 20
	fi
}

show_fake_stderr() {
	if [ -s "$work/$1.err" ]; then
		echo "# [$1] fake stderr:"
		sed 's/^/#   /' "$work/$1.err" | tail -n 20
	fi
}

fake_summary() {
	echo "$total_pass passed, $total_fail failed"
	[ "$total_fail" -eq 0 ]
}
