/*
 * gitattr.h - the host's git attribution: the co-author trailer commits
 * get when the request's git_attribution_enabled is set, and where in a
 * git command line it goes.
 *
 * Both the structured git tool (gateway/tools/git.c) and the launcher
 * that bash's commands find first on their PATH (sg-helper git-wrap,
 * helper/gitwrap.c) add it, so the text lives here once.
 *
 * Invariant: a command line is rewritten only when it is a commit that is
 * not an amend and whose options are whole; anything else is left as it
 * is (attribution is best effort, never a refusal).
 */
#ifndef SG_GITATTR_H
#define SG_GITATTR_H

/* The host's trailer (gitattribution.Trailer). */
#define SG_GIT_TRAILER \
	"Co-authored-by: WUU Agent <305930189+wuu-agent[bot]@users.noreply.github.com>"
/* The configuration that keeps the trailer once when it is already there. */
#define SG_GIT_TRAILER_RULE "trailer.Co-authored-by.ifexists=addIfDifferent"
/* The words a rewrite adds: -c RULE before the subcommand, --trailer T. */
#define SG_GIT_TRAILER_WORDS 4

/*
 * args (n words, git's own argv without the program) rewritten into out,
 * which has room for n + SG_GIT_TRAILER_WORDS pointers (borrowed from args
 * and the constants above): -c RULE before the subcommand and --trailer
 * TRAILER before commit's pathspecs.  Returns the new count, or -1 when
 * the line is left alone (not a commit, an amend, an option missing its
 * value).
 */
int sg_gitattr_commit_args(int n, char *const *args, char **out);

#endif
