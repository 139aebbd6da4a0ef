/*
 * fake.c - the fakes' request logs, read over one HTTP/1.0 GET each
 * from 127.0.0.1 (nothing here reaches any other address).
 */
#include "bench/sgbench.h"

/*
 * GET `target` from the fake on 127.0.0.1:port; the JSON body (new).  One
 * HTTP/1.0 exchange, so the fake closes the connection after the reply and
 * the body is everything after the header.
 */
json_t *fake_get(const struct fake *f, const char *target)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)f->port) };
	struct timeval tv = { 30, 0 };
	char *req = xasprintf("GET %s HTTP/1.0\r\nHost: 127.0.0.1:%ld\r\nConnection: close\r\n\r\n",
			      target, f->port);
	size_t cap = 1 * MiB, len = 0;
	char *buf = malloc(cap), *body;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	json_error_t je;
	json_t *j;

	if (fd < 0 || !buf)
		die("socket: %s", strerror(errno));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		die("cannot reach the fake Daytona on 127.0.0.1:%ld: %s", f->port, strerror(errno));
	write_all(fd, req, strlen(req));
	for (;;) {
		ssize_t n;

		if (len == cap) {
			if (cap >= 256 * MiB)
				die("GET %s: the reply exceeds 256 MiB", target);
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				die("out of memory");
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("GET %s from the fake: %s", target, strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || memcmp(buf + 9, "200", 3) != 0)
		die("GET %s from the fake: %.40s", target, len ? buf : "no reply");
	body = memmem(buf, len, "\r\n\r\n", 4);
	if (!body)
		die("GET %s from the fake: no end of header", target);
	body += 4;
	j = json_loadb(body, len - (size_t)(body - buf), 0, &je);
	if (!j)
		die("GET %s from the fake: %s", target, je.text);
	free(buf);
	free(req);
	return j;
}

/* The fake's request log from sequence number `since` on (new array). */
json_t *fake_requests(const struct fake *f, long long since)
{
	char target[64];
	json_t *j, *a;

	snprintf(target, sizeof(target), "/__fake/requests?since=%lld", since);
	j = fake_get(f, target);
	a = json_incref(json_object_get(j, "requests"));
	json_decref(j);
	if (!json_is_array(a))
		die("the fake's request log is not an array");
	return a;
}

/* The sequence number of the fake's last logged request (0: none yet). */
long long fake_last_seq(const struct fake *f)
{
	json_t *a = fake_requests(f, 0);
	size_t n = json_array_size(a);
	long long seq = n ? (long long)json_integer_value(
				    json_object_get(json_array_get(a, n - 1), "seq")) :
			    0;

	json_decref(a);
	return seq;
}

/* "2026-11-29T11:18:54.277Z" (JavaScript's toISOString) in ms, or -1. */
int64_t iso_ms(const char *s)
{
	struct tm tm = { 0 };
	int ms = 0;

	if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			 &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000 + ms;
}
