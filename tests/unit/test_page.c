/*
 * test_page.c - the paging list_files, grep and glob share (tool.h): the
 * revision a page is bound to, when a continuation still holds, and the
 * host's page object.
 *
 * The case that matters most is the loaded machine: sg-helper gives up on
 * the tree's revision after its deadline, so one page may carry the tree's
 * part and the next not.  The result digest is unchanged, so the
 * continuation holds; a changed result, or two trees both read and
 * different, never does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <jansson.h>

#include "gateway/tools/tool.h"

#define TREE_A "fs:worktree:7e6d2325ae8617e9"
#define TREE_B "fs:worktree:0000000000000001"
#define GIT_A "git:0123456789abcdef0123456789abcdef01234567:worktree:5a5a5a5a5a5a5a5a"

static void test_revision_form(void **state)
{
	char *r;

	(void)state;
	r = sg_tool_page_revision(TREE_A, "abc");
	assert_string_equal(r, TREE_A ";result:abc");
	free(r);
	r = sg_tool_page_revision("", "abc");
	assert_string_equal(r, "result:abc");
	free(r);
	r = sg_tool_page_revision(NULL, "abc");
	assert_string_equal(r, "result:abc");
	free(r);
}

static void test_same_revision_holds(void **state)
{
	(void)state;
	assert_true(sg_tool_page_current(TREE_A ";result:abc", TREE_A ";result:abc"));
	assert_true(sg_tool_page_current(" \t" TREE_A ";result:abc\n", TREE_A ";result:abc"));
	assert_true(sg_tool_page_current("result:abc", "result:abc"));
	assert_true(sg_tool_page_current(GIT_A ";result:abc", GIT_A ";result:abc"));
}

/* The CI failure this was written for: the second page's tree went unread. */
static void test_unread_tree_is_not_a_change(void **state)
{
	(void)state;
	assert_true(sg_tool_page_current(TREE_A ";result:abc", "result:abc"));
	assert_true(sg_tool_page_current("result:abc", TREE_A ";result:abc"));
	assert_true(sg_tool_page_current("result:abc", GIT_A ";result:abc"));
}

static void test_changes_are_stale(void **state)
{
	(void)state;
	/* The result changed, whatever is known of the tree. */
	assert_false(sg_tool_page_current(TREE_A ";result:abc", TREE_A ";result:abd"));
	assert_false(sg_tool_page_current(TREE_A ";result:abc", "result:abd"));
	assert_false(sg_tool_page_current("result:abc", "result:abcd"));
	assert_false(sg_tool_page_current("result:abcd", "result:abc"));
	/* Both trees read, and different. */
	assert_false(sg_tool_page_current(TREE_A ";result:abc", TREE_B ";result:abc"));
	assert_false(sg_tool_page_current(GIT_A ";result:abc", TREE_A ";result:abc"));
	/* A suffix smuggled after the result is part of the result. */
	assert_false(sg_tool_page_current(TREE_A ";result:abc;result:x", "result:abc"));
}

static void test_malformed_is_stale(void **state)
{
	(void)state;
	assert_false(sg_tool_page_current("", "result:abc"));
	assert_false(sg_tool_page_current("abc", "result:abc"));
	assert_false(sg_tool_page_current(TREE_A, "result:abc"));
	assert_false(sg_tool_page_current(TREE_A ";", "result:abc"));
	assert_false(sg_tool_page_current("result", "result:abc"));
	assert_false(sg_tool_page_current("xresult:abc", "result:abc"));
}

static void test_page_object(void **state)
{
	json_t *p, *next;

	(void)state;
	p = sg_tool_page(1000, 1000, true, "result:abc");
	assert_int_equal(json_integer_value(json_object_get(p, "offset")), 1000);
	assert_int_equal(json_integer_value(json_object_get(p, "returned")), 1000);
	assert_true(json_is_true(json_object_get(p, "has_more")));
	assert_string_equal(json_string_value(json_object_get(p, "snapshot_token")), "result:abc");
	next = json_object_get(p, "next");
	assert_int_equal(json_integer_value(json_object_get(next, "offset")), 2000);
	assert_string_equal(json_string_value(json_object_get(next, "expected_revision")),
			    "result:abc");
	json_decref(p);
	/* The last page, and a page past the end, say where to go no further. */
	p = sg_tool_page(2000, 5, false, "result:abc");
	assert_null(json_object_get(p, "next"));
	json_decref(p);
	p = sg_tool_page(9000, 0, true, "result:abc");
	assert_null(json_object_get(p, "next"));
	json_decref(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_revision_form),
		cmocka_unit_test(test_same_revision_holds),
		cmocka_unit_test(test_unread_tree_is_not_a_change),
		cmocka_unit_test(test_changes_are_stale),
		cmocka_unit_test(test_malformed_is_stale),
		cmocka_unit_test(test_page_object),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
