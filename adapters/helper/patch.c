/*
 * patch.c - `fs patch`: apply_patch's plan and commit (being written).
 */
#include "fs.h"

sg_err sg_fs_patch(struct fs *c)
{
	return sg_err_set(&c->err, SG_E_UNSUPPORTED, "fs patch is being written");
}
