/*
 * files.c - interim: being rewritten to the host's tools.
 */
#include "tool.h"

sg_err sg_tool_read_file(struct sg_tool_call *t, json_t **result)
{
	*result = NULL;
	return sg_err_set(&t->op->err, SG_E_UNSUPPORTED, "read_file is being rebuilt");
}

sg_err sg_tool_write_file(struct sg_tool_call *t, json_t **result)
{
	*result = NULL;
	return sg_err_set(&t->op->err, SG_E_UNSUPPORTED, "write_file is being rebuilt");
}

sg_err sg_tool_edit_file(struct sg_tool_call *t, json_t **result)
{
	*result = NULL;
	return sg_err_set(&t->op->err, SG_E_UNSUPPORTED, "edit_file is being rebuilt");
}

sg_err sg_tool_list_files(struct sg_tool_call *t, json_t **result)
{
	*result = NULL;
	return sg_err_set(&t->op->err, SG_E_UNSUPPORTED, "list_files is being rebuilt");
}

sg_err sg_tool_present_artifact(struct sg_tool_call *t, json_t **result)
{
	*result = NULL;
	return sg_err_set(&t->op->err, SG_E_UNSUPPORTED, "present_artifact is being rebuilt");
}

