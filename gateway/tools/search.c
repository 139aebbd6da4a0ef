/*
 * search.c - interim: being rewritten to the host's tools.
 */
#include "tool.h"

sg_err sg_tool_grep(struct sg_tool_call *t, json_t **result)
{
	*result = NULL;
	return sg_err_set(&t->op->err, SG_E_UNSUPPORTED, "grep is being rebuilt");
}

sg_err sg_tool_glob(struct sg_tool_call *t, json_t **result)
{
	*result = NULL;
	return sg_err_set(&t->op->err, SG_E_UNSUPPORTED, "glob is being rebuilt");
}

