/*
 * jsrun.cpp - sg-jsrun: runs one run_code program in SpiderMonkey, beside
 * the gateway, with no reach but its pipe.
 *
 * Invariants:
 * - One program per process.  The gateway writes the boot request as the
 *   first line on fd 0, then one line per nested call's result; this
 *   program writes log, call and done lines on fd 1 (bridge.js says what
 *   they hold).  Every line is one JSON text; JSON.stringify never writes a
 *   raw newline, so a newline ends a message.
 * - Before the program's first byte is compiled the process is confined:
 *   every descriptor but 0, 1 and 2 closed, no_new_privs, an address-space
 *   and a CPU limit, and a seccomp allow-list that leaves reading fd 0,
 *   writing fds 1 and 2, memory, threads and clocks.  Anything else fails
 *   with EPERM, so even an engine bug that ran arbitrary code could not
 *   open a file, a socket or a process.
 * - The engine runs without its JIT (JS::DisableJitBackend): nothing is
 *   ever mapped executable after start-up.
 * - The gateway owns time: a deadline or a cancel kills this process; a
 *   busy loop needs no cooperation.
 * - Exit status 0 once a done line is written; anything else means the
 *   program's result is lost and the gateway reports that.
 */
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <jsapi.h>
#include <jsfriendapi.h>
#include <js/CompilationAndEvaluation.h>
#include <js/Conversions.h>
#include <js/ContextOptions.h>
#include <js/Exception.h>
#include <js/Initialization.h>
#include <js/PropertyAndElement.h>
#include <js/RealmOptions.h>
#include <js/SourceText.h>
#include <js/String.h>

#include "bridge.inc"
#ifdef SG_JSRUN_STRIP
#include "strip.inc"
#endif

/* Limits, each named once. */
static const size_t JSRUN_LINE_MAX = 64u << 20;		/* one message, as the host's frame */
static const uint32_t JSRUN_HEAP_MAX = 256u << 20;	/* the JS heap */
static const rlim_t JSRUN_AS_MAX = (rlim_t)2 << 30;	/* the whole address space */
static const rlim_t JSRUN_CPU_MAX = 3600;		/* seconds; the gateway's deadline comes first */

static bool jsrun_done;

static bool jsrun_write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/*
 * One line from fd 0 without its newline; false at EOF, on an error or
 * past JSRUN_LINE_MAX.  Buffered across calls.
 */
static bool jsrun_read_line(std::string &line)
{
	static std::string pending;
	line.clear();
	for (;;) {
		size_t nl = pending.find('\n');
		if (nl != std::string::npos) {
			line.assign(pending, 0, nl);
			pending.erase(0, nl + 1);
			return true;
		}
		if (pending.size() > JSRUN_LINE_MAX)
			return false;
		char buf[65536];
		ssize_t r = read(0, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		pending.append(buf, (size_t)r);
	}
}

/* The native the bridge sends with: one string, one line on fd 1. */
static bool jsrun_send(JSContext *cx, unsigned argc, JS::Value *vp)
{
	JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
	JS::RootedString str(cx, JS::ToString(cx, args.get(0)));
	if (!str)
		return false;
	JS::UniqueChars utf8 = JS_EncodeStringToUTF8(cx, str);
	if (!utf8)
		return false;
	std::string line(utf8.get());
	/* A done line is the program's last word; nothing after it counts. */
	if (line.compare(0, 11, "{\"t\":\"done\"") == 0)
		jsrun_done = true;
	line.push_back('\n');
	if (!jsrun_write_all(1, line.data(), line.size())) {
		JS_ReportErrorASCII(cx, "the gateway's pipe is closed");
		return false;
	}
	args.rval().setUndefined();
	return true;
}

/*
 * The native the bridge loads the TypeScript stripper with (strip.inc,
 * cmake/jsrun.cmake): the function strip(code) -> code, or null in a
 * build without it.  The bridge calls it only for a program that does not
 * compile as JavaScript, before the program runs, so the stripper's cost
 * (tens of milliseconds without a JIT) is paid only by TypeScript.
 */
static bool jsrun_load_strip(JSContext *cx, unsigned argc, JS::Value *vp)
{
	JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
#ifdef SG_JSRUN_STRIP
	JS::CompileOptions opts(cx);
	opts.setFileAndLine("strip.js", 1);
	JS::SourceText<mozilla::Utf8Unit> src;
	if (!src.init(cx, jsrun_strip_js, strlen(jsrun_strip_js), JS::SourceOwnership::Borrowed))
		return false;
	return JS::Evaluate(cx, opts, src, args.rval());
#else
	(void)cx;
	args.rval().setNull();
	return true;
#endif
}

/* The allow-list; each entry is a syscall number, or one with an fd rule. */
#define JSRUN_ALLOW(nr) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

#if defined(__x86_64__)
#define JSRUN_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define JSRUN_ARCH AUDIT_ARCH_AARCH64
#else
#error "sg-jsrun knows the seccomp architecture of x86_64 and aarch64 only"
#endif

static int jsrun_seccomp(void)
{
	const unsigned eperm = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, JSRUN_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
		/* x32 numbers alias x86_64 ones: refuse the whole ABI. */
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
#endif
		/* read(0, ...) only. */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_read, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, eperm),
		/* write(1 or 2, ...) only. */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, eperm),
		/* clone only for a thread of this process (the engine's helpers). */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, eperm),
		/* clone3 hides its flags in memory: ENOSYS makes libc use clone. */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
		JSRUN_ALLOW(__NR_mmap), JSRUN_ALLOW(__NR_munmap), JSRUN_ALLOW(__NR_mprotect),
		JSRUN_ALLOW(__NR_mremap), JSRUN_ALLOW(__NR_madvise), JSRUN_ALLOW(__NR_brk),
		JSRUN_ALLOW(__NR_futex), JSRUN_ALLOW(__NR_set_robust_list), JSRUN_ALLOW(__NR_rseq),
		JSRUN_ALLOW(__NR_sched_yield), JSRUN_ALLOW(__NR_sched_getaffinity),
		JSRUN_ALLOW(__NR_clock_gettime), JSRUN_ALLOW(__NR_clock_nanosleep),
		JSRUN_ALLOW(__NR_nanosleep), JSRUN_ALLOW(__NR_gettid), JSRUN_ALLOW(__NR_getpid),
		JSRUN_ALLOW(__NR_getrandom), JSRUN_ALLOW(__NR_rt_sigprocmask),
		JSRUN_ALLOW(__NR_rt_sigreturn), JSRUN_ALLOW(__NR_sigaltstack),
		JSRUN_ALLOW(__NR_exit), JSRUN_ALLOW(__NR_exit_group),
		BPF_STMT(BPF_RET | BPF_K, eperm),
	};
	struct sock_fprog prog = { (unsigned short)(sizeof f / sizeof f[0]), f };
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* Everything but the pipe and memory goes before the program compiles. */
static int jsrun_confine(void)
{
	struct rlimit as = { JSRUN_AS_MAX, JSRUN_AS_MAX };
	struct rlimit cpu = { JSRUN_CPU_MAX, JSRUN_CPU_MAX };
	struct rlimit none = { 0, 0 };

	/*
	 * The gateway's thread that started this process waits for it to
	 * end; if the gateway dies instead, so does the program.
	 */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		return -1;

	if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
	if (setrlimit(RLIMIT_AS, &as) != 0 || setrlimit(RLIMIT_CPU, &cpu) != 0 ||
	    setrlimit(RLIMIT_CORE, &none) != 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return jsrun_seccomp();
}

/* The pending exception's message, or what an uncatchable stop means. */
static std::string jsrun_exception(JSContext *cx)
{
	JS::RootedValue exc(cx);
	if (!JS_IsExceptionPending(cx) || !JS_GetPendingException(cx, &exc))
		return "the program was stopped (out of memory)";
	JS_ClearPendingException(cx);
	JS::RootedString s(cx, JS::ToString(cx, exc));
	if (!s)
		return "the program failed";
	JS::UniqueChars utf8 = JS_EncodeStringToUTF8(cx, s);
	return utf8 ? utf8.get() : "the program failed";
}

static void jsrun_fail(const std::string &why)
{
	std::string msg = "{\"t\":\"done\",\"error\":\"";
	for (char c : why) {
		if (c == '"' || c == '\\') {
			msg.push_back('\\');
			msg.push_back(c);
		} else if ((unsigned char)c < 0x20) {
			char esc[8];
			snprintf(esc, sizeof esc, "\\u%04x", (unsigned)(unsigned char)c);
			msg += esc;
		} else {
			msg.push_back(c);
		}
	}
	msg += "\"}\n";
	jsrun_write_all(1, msg.data(), msg.size());
	jsrun_done = true;
}

static JSClass jsrun_global_class = { "global", JSCLASS_GLOBAL_FLAGS,
					&JS::DefaultGlobalClassOps, nullptr, nullptr, nullptr };

/* The realm: standard classes less WebAssembly and shared memory. */
static JSObject *jsrun_global(JSContext *cx)
{
	JS::RealmOptions opts;
	opts.creationOptions().setSharedMemoryAndAtomicsEnabled(false);
	JS::RootedObject g(cx, JS_NewGlobalObject(cx, &jsrun_global_class, nullptr,
						  JS::FireOnNewGlobalHook, opts));
	if (!g)
		return nullptr;
	JSAutoRealm ar(cx, g);
	if (!JS::InitRealmStandardClasses(cx))
		return nullptr;
	static const char *const gone[] = { "WebAssembly", "SharedArrayBuffer", "Atomics",
					    "FinalizationRegistry", "WeakRef" };
	for (const char *name : gone) {
		bool found = false;
		if (JS_HasProperty(cx, g, name, &found) && found && !JS_DeleteProperty(cx, g, name))
			return nullptr;
	}
	return g;
}

/* Compiles the bridge and starts the program; the bridge's receive. */
static bool jsrun_start(JSContext *cx, JS::HandleObject g, const std::string &boot,
			JS::MutableHandleValue receive)
{
	JS::CompileOptions opts(cx);
	opts.setFileAndLine("bridge.js", 1);
	JS::SourceText<mozilla::Utf8Unit> src;
	if (!src.init(cx, jsrun_bridge_js, strlen(jsrun_bridge_js), JS::SourceOwnership::Borrowed))
		return false;
	JS::RootedValue fn(cx);
	if (!JS::Evaluate(cx, opts, src, &fn))
		return false;
	JSFunction *send = JS_NewFunction(cx, jsrun_send, 1, 0, "send");
	if (!send)
		return false;
	JS::RootedString bootstr(cx, JS_NewStringCopyUTF8N(cx, JS::UTF8Chars(boot.data(), boot.size())));
	if (!bootstr)
		return false;
	JSFunction *load_strip = JS_NewFunction(cx, jsrun_load_strip, 0, 0, "loadStrip");
	if (!load_strip)
		return false;
	JS::RootedValueArray<3> argv(cx);
	argv[0].setObject(*JS_GetFunctionObject(send));
	argv[1].setString(bootstr);
	argv[2].setObject(*JS_GetFunctionObject(load_strip));
	return JS_CallFunctionValue(cx, g, fn, argv, receive);
}

/* Feeds results to the bridge until the program is done. */
static int jsrun_loop(JSContext *cx, JS::HandleObject g, JS::HandleValue receive)
{
	std::string line;
	for (;;) {
		js::RunJobs(cx);
		if (jsrun_done)
			return 0;
		JS::RootedValueArray<1> argv(cx);
		JS::RootedValue rval(cx);
		argv[0].setNull();
		if (!JS_CallFunctionValue(cx, g, receive, argv, &rval)) {
			jsrun_fail(jsrun_exception(cx));
			return 0;
		}
		if (jsrun_done)
			return 0;
		if (!jsrun_read_line(line))
			return 1;
		JS::RootedString s(cx, JS_NewStringCopyUTF8N(cx, JS::UTF8Chars(line.data(), line.size())));
		if (!s) {
			jsrun_fail(jsrun_exception(cx));
			return 0;
		}
		argv[0].setString(s);
		if (!JS_CallFunctionValue(cx, g, receive, argv, &rval)) {
			jsrun_fail(jsrun_exception(cx));
			return 0;
		}
	}
}

int main(void)
{
	std::string boot;
	int rc = 1;

	if (!jsrun_read_line(boot))
		return 1;
	/*
	 * No JIT at all: no executable memory is ever mapped, which removes
	 * the engine's largest class of exploitable bugs and its gigabyte
	 * code reservation (RLIMIT_AS would refuse it).  Programs orchestrate
	 * tool calls; the interpreter is fast enough for that.
	 */
	JS::DisableJitBackend();
	if (!JS_Init())
		return 1;
	JSContext *cx = JS_NewContext(JSRUN_HEAP_MAX);
	if (!cx)
		return 1;
	JS_SetGlobalJitCompilerOption(cx, JSJITCOMPILER_BASELINE_INTERPRETER_ENABLE, 0);
	JS_SetGlobalJitCompilerOption(cx, JSJITCOMPILER_BASELINE_ENABLE, 0);
	JS_SetGlobalJitCompilerOption(cx, JSJITCOMPILER_ION_ENABLE, 0);
	JS_SetGlobalJitCompilerOption(cx, JSJITCOMPILER_NATIVE_REGEXP_ENABLE, 0);
	JS::ContextOptionsRef(cx).setWasm(false).setAsmJS(false);
	if (!js::UseInternalJobQueues(cx) || !JS::InitSelfHostedCode(cx))
		return 1;
	{
		JS::RootedObject g(cx, jsrun_global(cx));
		if (!g)
			return 1;
		JSAutoRealm ar(cx, g);
		if (jsrun_confine() != 0) {
			jsrun_fail(std::string("sg-jsrun could not confine itself: ") + strerror(errno));
			return 0;
		}
		JS::RootedValue receive(cx);
		if (!jsrun_start(cx, g, boot, &receive)) {
			jsrun_fail(jsrun_exception(cx));
			rc = 0;
		} else {
			rc = jsrun_loop(cx, g, receive);
		}
	}
	/* The process ends here; the engine's teardown would only cost time. */
	_exit(rc);
}
