/*
 * stats.c - clocks, nearest-rank percentiles and the helpers every set
 * shares: dying with a message (the state directory named, so its logs can
 * be read), formatting, writing whole buffers, the gateway's /proc status.
 */
#include "bench/sgbench.h"

#include <stdarg.h>

int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentiles of v (sorted in place). */
struct dist dist_of(int64_t *v, size_t n)
{
	struct dist d = { 0 };
	double sum = 0;

	if (n == 0)
		return d;
	qsort(v, n, sizeof(*v), cmp_i64);
	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	d.n = n;
	d.min = v[0];
	d.max = v[n - 1];
	d.mean = sum / (double)n;
	d.p50 = v[(n * 50 + 99) / 100 - 1];
	d.p90 = v[(n * 90 + 99) / 100 - 1];
	d.p99 = v[(n * 99 + 99) / 100 - 1];
	return d;
}

json_t *dist_json(const struct dist *d)
{
	return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t)d->n,
			 "min_us", d->min / 1e3, "p50_us", d->p50 / 1e3, "p90_us",
			 d->p90 / 1e3, "p99_us", d->p99 / 1e3, "max_us", d->max / 1e3,
			 "mean_us", d->mean / 1e3);
}

/* The state directory, named when a run dies so its gateway.log can be read. */
const char *state_for_errors;

void die(const char *fmt, ...)
{
	va_list ap;

	fputs("sgbench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (state_for_errors)
		fprintf(stderr, "sgbench: the state directory %s is kept\n",
			state_for_errors);
	exit(1);
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("out of memory");
	return p;
}

void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die("write: %s", strerror(errno));
		c += w;
		n -= (size_t)w;
	}
}

long parse_count(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0)
		die("%s: not a count: %s", what, s);
	return v;
}

/* VmRSS and VmHWM in KiB; false if the process is gone. */
bool read_rss(pid_t pid, long *rss_kib, long *hwm_kib)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	*rss_kib = *hwm_kib = -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "VmRSS:", 6) == 0)
			*rss_kib = strtol(line + 6, NULL, 10);
		else if (strncmp(line, "VmHWM:", 6) == 0)
			*hwm_kib = strtol(line + 6, NULL, 10);
	}
	fclose(f);
	return *rss_kib >= 0;
}

/*
 * The 1 MiB text file read_file and the raw cat read: printable lines of
 * 100 bytes (pseudo-random letters), so the JSON reply carries it with few
 * escapes, like source code.  New, SSH_READ_BYTES long, NUL-terminated.
 */
char *text_mib(void)
{
	char *t = malloc(SSH_READ_BYTES + 1);
	uint64_t x = 0x2545F4914F6CDD1DULL;

	if (!t)
		die("out of memory");
	for (size_t i = 0; i < SSH_READ_BYTES; i++) {
		if (i % 100 == 99) {
			t[i] = '\n';
			continue;
		}
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		t[i] = (char)('a' + (x * 0x2545F4914F6CDD1DULL >> 59) % 26);
	}
	t[SSH_READ_BYTES] = '\0';
	return t;
}

/* Wall-clock milliseconds, the fake's clock; rounded up with `up`. */
int64_t wall_ms(bool up)
{
	struct timespec ts;
	int64_t ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	if (up && ts.tv_nsec % 1000000)
		ms++;
	return ms;
}

int64_t wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
