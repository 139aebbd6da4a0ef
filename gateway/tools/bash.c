/*
 * bash.c - interim: being rewritten to the host's tools.
 */
#include "tool.h"

sg_err sg_tool_bash(struct sg_tool_call *t, json_t **result)
{
	*result = NULL;
	return sg_err_set(&t->op->err, SG_E_UNSUPPORTED, "bash is being rebuilt");
}

