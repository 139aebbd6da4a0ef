/*
 * leg.c - work on a thread of its own beside the caller's (leg.h).
 */
#include "core/leg.h"

static void *leg_main(void *arg)
{
	struct sg_leg *l = arg;
	int64_t t0 = sg_now_ms();

	l->rc = l->run(l->arg, &l->stop);
	l->ms = sg_now_ms() - t0;
	/* The last touch of l: the caller may end the leg from here on. */
	sg_cancel_fire(&l->done, SG_E_CANCELLED);
	return NULL;
}

sg_err sg_leg_start(struct sg_leg *l, struct sg_errinfo *err)
{
	sg_err rc = SG_E_INTERNAL;

	l->started = false;
	l->rc = SG_OK;
	l->ms = 0;
	if (sg_cancel_init(&l->stop) != SG_OK)
		goto out;
	if (sg_cancel_init(&l->done) != SG_OK) {
		sg_cancel_release(&l->stop);
		goto out;
	}
	if (pthread_create(&l->thread, NULL, leg_main, l) != 0) {
		sg_cancel_release(&l->done);
		sg_cancel_release(&l->stop);
		goto out;
	}
	l->started = true;
	rc = SG_OK;
out:
	return rc ? sg_err_set(err, rc, "cannot start a thread beside this request") : SG_OK;
}

bool sg_leg_ended(const struct sg_leg *l)
{
	return !l->started || sg_cancel_check(&l->done);
}

int sg_leg_fd(const struct sg_leg *l)
{
	return sg_leg_ended(l) ? -1 : sg_cancel_fd(&l->done);
}

void sg_leg_stop(struct sg_leg *l, sg_err why, const char *reason)
{
	if (l->started)
		sg_cancel_fire_with(&l->stop, why, reason);
}

void sg_leg_end(struct sg_leg *l, sg_err why)
{
	if (!l->started)
		return;
	/* An ended leg's run no longer looks at its stop token. */
	if (why)
		sg_cancel_fire(&l->stop, why);
	pthread_join(l->thread, NULL);
	sg_cancel_release(&l->done);
	sg_cancel_release(&l->stop);
	l->started = false;
}
