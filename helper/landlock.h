/*
 * landlock.h - the Landlock ABI (Linux 5.13+) that sg-helper confines
 * commands with.
 *
 * sg-helper is built twice: against glibc with the distribution's kernel
 * headers, and statically with musl-gcc, which ships no kernel headers at
 * all.  So <linux/landlock.h> is used when it exists, and every structure,
 * constant and syscall number this code needs is defined here when it is
 * missing.  Even a present header may predate the rights added later
 * (Debian 12's stops at REFER, ABI 2), so each constant is guarded on its
 * own.  The values are the kernel's ABI and never change.
 *
 * Invariants:
 *  - The including .c file defines _GNU_SOURCE before its first #include:
 *    glibc declares syscall() only then (checked below).
 *  - The wrappers are thin syscall() calls: no allocation, no locks, so
 *    they are safe between fork() and exec().
 *  - Rights are only ever asked for under the ABI that introduced them:
 *    sg_landlock_fs_rights() gives the set the running kernel knows.
 */
#ifndef SG_LANDLOCK_H
#define SG_LANDLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__GLIBC__) && !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
#error "define _GNU_SOURCE before including landlock.h (glibc hides syscall())"
#endif

#if defined(__has_include)
#if __has_include(<linux/landlock.h>)
#include <linux/landlock.h>
#define SG_LANDLOCK_SYSTEM_HEADER 1
#endif
#endif

#ifndef SG_LANDLOCK_SYSTEM_HEADER
/*
 * The first member of each structure is all sandgate sets.  The kernel
 * accepts a shorter landlock_ruleset_attr than its own (it is versioned by
 * size), and landlock_path_beneath_attr is packed and has never grown.
 */
struct landlock_ruleset_attr {
	uint64_t handled_access_fs;
};

struct landlock_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

enum landlock_rule_type {
	LANDLOCK_RULE_PATH_BENEATH = 1,
};
#endif

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

/* ABI 1. */
#ifndef LANDLOCK_ACCESS_FS_EXECUTE
#define LANDLOCK_ACCESS_FS_EXECUTE (1ULL << 0)
#define LANDLOCK_ACCESS_FS_WRITE_FILE (1ULL << 1)
#define LANDLOCK_ACCESS_FS_READ_FILE (1ULL << 2)
#define LANDLOCK_ACCESS_FS_READ_DIR (1ULL << 3)
#define LANDLOCK_ACCESS_FS_REMOVE_DIR (1ULL << 4)
#define LANDLOCK_ACCESS_FS_REMOVE_FILE (1ULL << 5)
#define LANDLOCK_ACCESS_FS_MAKE_CHAR (1ULL << 6)
#define LANDLOCK_ACCESS_FS_MAKE_DIR (1ULL << 7)
#define LANDLOCK_ACCESS_FS_MAKE_REG (1ULL << 8)
#define LANDLOCK_ACCESS_FS_MAKE_SOCK (1ULL << 9)
#define LANDLOCK_ACCESS_FS_MAKE_FIFO (1ULL << 10)
#define LANDLOCK_ACCESS_FS_MAKE_BLOCK (1ULL << 11)
#define LANDLOCK_ACCESS_FS_MAKE_SYM (1ULL << 12)
#endif
/* ABI 2: moving and linking files between directories. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
/* ABI 3: truncate(2), ftruncate(2) and open(O_TRUNC). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
/* ABI 5: ioctl(2) on character and block devices. */
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

/* ABI 6: what a process may reach outside its Landlock domain. */
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/*
 * A ruleset's attributes as of ABI 6 (handled_access_net came with ABI
 * 4, scoped with 6), named apart from the system header's struct, which
 * may be older.  A kernel that knows fewer fields takes the longer struct
 * as long as the fields it does not know are zero.
 */
struct sg_landlock_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

/*
 * The syscall numbers come from the unified table, shared by x86_64 and
 * aarch64 (the two architectures sg-helper is built for).
 */
#ifndef SYS_landlock_create_ruleset
#if defined(__x86_64__) || defined(__aarch64__)
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#else
#error "Landlock syscall numbers are unknown for this architecture"
#endif
#endif

/* Rights reading and running need. */
#define SG_LANDLOCK_READ                                                    \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |        \
	 LANDLOCK_ACCESS_FS_READ_DIR)

/*
 * Rights that make sense on a file rather than a directory: a rule on a
 * file that names any other right is refused with EINVAL.
 */
#define SG_LANDLOCK_FILE_RIGHTS                                             \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |       \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |       \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

/*
 * Every filesystem right the kernel with Landlock ABI `abi` understands;
 * handling all of them leaves nothing silently allowed.
 */
static inline uint64_t sg_landlock_fs_rights(int abi)
{
	uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1 */

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return r;
}

/*
 * The running kernel's Landlock ABI version (1, 2 ...), or -1 with errno
 * (ENOSYS: not built in; EOPNOTSUPP: built in but disabled at boot).
 */
static inline int sg_landlock_abi(void)
{
	return (int)syscall(SYS_landlock_create_ruleset, NULL, (size_t)0,
			    (uint32_t)LANDLOCK_CREATE_RULESET_VERSION);
}

/* A new ruleset descriptor (close-on-exec), or -1 with errno. */
static inline int
sg_landlock_create_ruleset(const struct sg_landlock_attr *attr)
{
	return (int)syscall(SYS_landlock_create_ruleset, attr, sizeof(*attr),
			    (uint32_t)0);
}

/* Add a path_beneath rule; 0 or -1 with errno. */
static inline int
sg_landlock_add_path(int ruleset, const struct landlock_path_beneath_attr *pb)
{
	return (int)syscall(SYS_landlock_add_rule, ruleset,
			    LANDLOCK_RULE_PATH_BENEATH, pb, (uint32_t)0);
}

/* Enforce the ruleset on the calling thread; 0 or -1 with errno. */
static inline int sg_landlock_restrict_self(int ruleset)
{
	return (int)syscall(SYS_landlock_restrict_self, ruleset, (uint32_t)0);
}

#endif
