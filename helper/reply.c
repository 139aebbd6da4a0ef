#include "helper/internal.h"

#include <stdio.h>
#include <string.h>

#include "base/jw.h"

/*
 * Replies are small and the buffer's max is far above them, so a failed
 * append can only mean the caller's buffer is broken; the reply is then
 * left as far as it got and the gateway reports the unparsable answer.
 */
void sg_reply_error(struct sg_buf *out, const struct sg_errinfo *err)
{
	const char *msg = err->msg[0] ? err->msg : "the operation failed";

	sg_buf_reset(out);
	if (sg_buf_adds(out, "{\"error\":") ||
	    sg_jw_str(out, sg_err_word(err->code), strlen(sg_err_word(err->code))) ||
	    sg_buf_adds(out, ",\"message\":") ||
	    sg_jw_str(out, msg, strlen(msg)) || sg_buf_addc(out, '}'))
		return;
}

void sg_reply_tool_error(struct sg_buf *out, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sg_buf_reset(out);
	if (sg_buf_adds(out, "{\"ok\":false,\"tool_error\":") ||
	    sg_jw_str(out, msg, strlen(msg)) || sg_buf_addc(out, '}'))
		return;
}

sg_err sg_reply_ok(struct sg_buf *out)
{
	sg_buf_reset(out);
	return sg_buf_adds(out, "{\"ok\":true");
}

sg_err sg_reply_end(struct sg_buf *out)
{
	return sg_buf_addc(out, '}');
}
