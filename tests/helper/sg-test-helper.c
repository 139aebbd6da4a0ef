/*
 * sg-test-helper.c - one child program with many behaviours, for the
 * process and exec tests (libuv's spawn_helper idea).
 *
 *   sg-test-helper MODE [ARGS]
 *
 *   echo-stdin          copy stdin to stdout until EOF
 *   print N             N bytes of pattern(): byte i is 'a' + i % 26
 *   exit K              exit with status K
 *   signal SIG          raise signal number SIG (with its default action)
 *   sleep MS            sleep MS milliseconds, then exit 0
 *   ignore-term MS      ignore SIGTERM, print "ready\n", sleep MS
 *   grandchild MS [P]   fork a child in our process group that sleeps MS
 *                       (holding stdout); print its pid and a newline, then
 *                       sleep P milliseconds (default 0) and exit
 *   daemon MS           fork a child that calls setsid() and sleeps MS
 *                       holding stdout and stderr open; print its pid once it
 *                       is in its own session, and exit
 *   daemon-quiet MS     the same, but the daemon points stdout and stderr at
 *                       /dev/null before sleeping
 *   invalid-utf8        print ff fe, then a 3-byte character (U+20AC) split
 *                       across two writes 20 ms apart, then a newline
 *   utf8-edge N         print N-1 ASCII bytes then U+20AC (3 bytes)
 *   env                 print each environment entry and a newline
 *   fds                 print each open descriptor number (from
 *                       /proc/self/fd, without the one used to list it),
 *                       one per line
 *   signals             print the SigBlk and SigIgn lines of
 *                       /proc/self/status
 *   pwd                 print the working directory and a newline
 *   stderr TEXT         write TEXT to stderr
 *   interleave N        N times: "out I\n" to stdout then "err I\n" to
 *                       stderr
 *   spin-output MS      "tick I\n" every 5 ms for MS milliseconds
 *
 * Exit status 2 means a usage error (message on stderr).  A standalone
 * program: libc only, no project headers, so it behaves the same under
 * every build option of the project.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int write_str(int fd, const char *s)
{
	return write_all(fd, s, strlen(s));
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int usage(const char *why)
{
	write_str(2, "sg-test-helper: ");
	write_str(2, why);
	write_str(2, "\n");
	return 2;
}

/* A non-negative decimal argument, or -1. */
static long number(const char *s)
{
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0)
		return -1;
	return v;
}

static int print_line_number(int fd, const char *prefix, long v)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%s%ld\n", prefix, v);

	return write_all(fd, line, (size_t)n);
}

static int do_echo_stdin(void)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? 1 : 0;
		if (write_all(1, buf, (size_t)n) < 0)
			return 1;
	}
}

static int do_print(long n)
{
	char buf[65536];
	long off = 0;

	while (off < n) {
		size_t take = n - off < (long)sizeof(buf) ? (size_t)(n - off)
							  : sizeof(buf);

		for (size_t i = 0; i < take; i++)
			buf[i] = (char)('a' + (off + (long)i) % 26);
		if (write_all(1, buf, take) < 0)
			return 1;
		off += (long)take;
	}
	return 0;
}

/* fork() a sleeper in our process group; returns its pid or -1. */
static pid_t sleeper(long ms)
{
	pid_t pid = fork();

	if (pid == 0) {
		sleep_ms(ms);
		_exit(0);
	}
	return pid;
}

static int do_daemon(long ms, int quiet)
{
	int sync[2];
	pid_t pid;
	char c = 0;

	if (pipe(sync) < 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(sync[0]);
		setsid();
		if (quiet) {
			int null = open("/dev/null", O_WRONLY);

			dup2(null, 1);
			dup2(null, 2);
			close(null);
		}
		/* Now out of the parent's group: tell it so. */
		write_all(sync[1], "x", 1);
		close(sync[1]);
		sleep_ms(ms);
		_exit(0);
	}
	close(sync[1]);
	while (read(sync[0], &c, 1) < 0 && errno == EINTR)
		;
	close(sync[0]);
	return print_line_number(1, "", (long)pid) < 0 ? 1 : 0;
}

static int do_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int own;

	if (!d)
		return 1;
	own = dirfd(d);
	while ((e = readdir(d)) != NULL) {
		long fd = number(e->d_name);

		if (fd < 0 || fd == own)
			continue;
		print_line_number(1, "", fd);
	}
	closedir(d);
	return 0;
}

static int do_signals(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];

	if (!f)
		return 1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "SigBlk:", 7) == 0 ||
		    strncmp(line, "SigIgn:", 7) == 0)
			write_str(1, line);
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	long n = argc > 2 ? number(argv[2]) : -1;

	if (strcmp(mode, "echo-stdin") == 0)
		return do_echo_stdin();
	if (strcmp(mode, "print") == 0) {
		if (n < 0)
			return usage("print N");
		return do_print(n);
	}
	if (strcmp(mode, "exit") == 0) {
		if (n < 0 || n > 255)
			return usage("exit K (0..255)");
		return (int)n;
	}
	if (strcmp(mode, "signal") == 0) {
		if (n <= 0)
			return usage("signal SIG");
		signal((int)n, SIG_DFL);
		raise((int)n);
		return 3;
	}
	if (strcmp(mode, "sleep") == 0) {
		if (n < 0)
			return usage("sleep MS");
		sleep_ms(n);
		return 0;
	}
	if (strcmp(mode, "ignore-term") == 0) {
		if (n < 0)
			return usage("ignore-term MS");
		signal(SIGTERM, SIG_IGN);
		write_str(1, "ready\n");
		sleep_ms(n);
		return 0;
	}
	if (strcmp(mode, "grandchild") == 0) {
		long parent_ms = argc > 3 ? number(argv[3]) : 0;
		pid_t pid;

		if (n < 0 || parent_ms < 0)
			return usage("grandchild MS [PARENT_MS]");
		pid = sleeper(n);
		if (pid < 0)
			return 1;
		print_line_number(1, "", (long)pid);
		sleep_ms(parent_ms);
		return 0;
	}
	if (strcmp(mode, "daemon") == 0 || strcmp(mode, "daemon-quiet") == 0) {
		if (n < 0)
			return usage("daemon MS");
		return do_daemon(n, strcmp(mode, "daemon-quiet") == 0);
	}
	if (strcmp(mode, "invalid-utf8") == 0) {
		write_all(1, "\xff\xfe", 2);
		write_all(1, "\xe2\x82", 2);
		sleep_ms(20);
		write_all(1, "\xac\n", 2);
		return 0;
	}
	if (strcmp(mode, "utf8-edge") == 0) {
		if (n < 1)
			return usage("utf8-edge N (N >= 1)");
		for (long i = 0; i < n - 1; i++)
			write_all(1, "x", 1);
		write_all(1, "\xe2\x82\xac", 3);
		return 0;
	}
	if (strcmp(mode, "env") == 0) {
		for (char **e = environ; *e; e++) {
			write_str(1, *e);
			write_str(1, "\n");
		}
		return 0;
	}
	if (strcmp(mode, "fds") == 0)
		return do_fds();
	if (strcmp(mode, "signals") == 0)
		return do_signals();
	if (strcmp(mode, "pwd") == 0) {
		char cwd[4096];

		if (!getcwd(cwd, sizeof(cwd)))
			return 1;
		write_str(1, cwd);
		write_str(1, "\n");
		return 0;
	}
	if (strcmp(mode, "stderr") == 0) {
		if (argc < 3)
			return usage("stderr TEXT");
		write_str(2, argv[2]);
		return 0;
	}
	if (strcmp(mode, "interleave") == 0) {
		if (n < 0)
			return usage("interleave N");
		for (long i = 0; i < n; i++) {
			print_line_number(1, "out ", i);
			print_line_number(2, "err ", i);
		}
		return 0;
	}
	if (strcmp(mode, "spin-output") == 0) {
		long end;

		if (n < 0)
			return usage("spin-output MS");
		end = now_ms() + n;
		for (long i = 0; now_ms() < end; i++) {
			print_line_number(1, "tick ", i);
			sleep_ms(5);
		}
		return 0;
	}
	return usage("unknown mode (see the comment at the top of "
		     "tests/helper/sg-test-helper.c)");
}
