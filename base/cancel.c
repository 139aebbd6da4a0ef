#define _GNU_SOURCE
#include "base/cancel.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* sg_cancel_set_quit's deadline; 0: none. */
static atomic_llong quit_at_ms;

void sg_cancel_set_quit(int64_t at_ms)
{
	atomic_store(&quit_at_ms, (long long)(at_ms > 0 ? at_ms : 1));
}

int64_t sg_cancel_quit_clip(int64_t ms)
{
	long long at = atomic_load(&quit_at_ms);
	int64_t left;

	if (!at)
		return ms;
	left = (int64_t)at - sg_now_ms();
	return left <= 0 ? 0 : left < ms ? left : ms;
}

sg_err sg_cancel_init(struct sg_cancel *c)
{
	atomic_init(&c->why, SG_OK);
	atomic_init(&c->reason, NULL);
	c->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return c->fd < 0 ? SG_E_INTERNAL : SG_OK;
}

void sg_cancel_release(struct sg_cancel *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

void sg_cancel_fire(struct sg_cancel *c, sg_err why)
{
	int expected = SG_OK;
	uint64_t one = 1;

	if (!c)
		return;
	if (atomic_compare_exchange_strong(&c->why, &expected, (int)why) &&
	    c->fd >= 0) {
		/* The counter is never read, so the fd stays readable for good. */
		while (write(c->fd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
	}
}

void sg_cancel_fire_with(struct sg_cancel *c, sg_err why, const char *reason)
{
	const char *none = NULL;

	if (!c)
		return;
	/* The words go first, so a waiter that sees the token fired finds them. */
	atomic_compare_exchange_strong(&c->reason, &none, reason);
	sg_cancel_fire(c, why);
}

const char *sg_cancel_reason(const struct sg_cancel *c)
{
	return c ? atomic_load(&((struct sg_cancel *)c)->reason) : NULL;
}

sg_err sg_cancel_check(const struct sg_cancel *c)
{
	return c ? (sg_err)atomic_load(&((struct sg_cancel *)c)->why) : SG_OK;
}

int sg_cancel_fd(const struct sg_cancel *c)
{
	return c ? c->fd : -1;
}

int64_t sg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec sg_time_after(clockid_t clock, int64_t ms)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

int64_t sg_now_ms(void)
{
	return sg_now_ns() / 1000000;
}

sg_err sg_cancel_sleep(const struct sg_cancel *c, int64_t ms)
{
	int64_t end = sg_now_ms() + ms;
	struct pollfd pfd = { .fd = sg_cancel_fd(c), .events = POLLIN };
	sg_err rc;

	while ((rc = sg_cancel_check(c)) == SG_OK) {
		int64_t left = end - sg_now_ms();

		if (left <= 0)
			break;
		poll(&pfd, pfd.fd >= 0 ? 1 : 0, left > 1000000 ? 1000000 : (int)left);
	}
	return rc;
}
