/*
 * nosuid.c - a seccomp filter that keeps a command from setting the setuid
 * or setgid bit on any file.
 *
 * A local sandbox's commands run as sandgate's user.  Where that is root,
 * a file a command marks setuid (chmod u+s, or created with the bit) is a
 * setuid-root program on the host, in a workspace other users of the host
 * may reach; bubblewrap's nosuid mounts protect only the sandbox's own view.
 * No file right covers mode bits, so the filter looks at the mode argument
 * of every call that sets one (chmod, fchmod, fchmodat, fchmodat2, open,
 * openat, creat, mknod, mknodat) and fails the call with EPERM when it
 * holds S_ISUID or S_ISGID.  Two calls whose mode it cannot see are refused
 * as if absent (ENOSYS, so callers take their usual fallback): openat2,
 * whose mode is in a structure, and io_uring_setup, whose operations never
 * pass through seccomp.  A call of another architecture (i386 or x32 on
 * x86_64) is refused the same way, since its numbers differ: 32-bit
 * programs do not run under the filter.
 */
/* _GNU_SOURCE: the syscall numbers behind <sys/syscall.h>. */
#define _GNU_SOURCE

#include "helper/internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The static helper is built against musl, which puts no kernel headers on
 * its path (cmake/helper.cmake): the seccomp ABI below is the kernel's own,
 * fixed since Linux 3.5, restated only where the headers are missing.
 */
#if __has_include(<linux/seccomp.h>) && __has_include(<linux/filter.h>) && \
	__has_include(<linux/audit.h>)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#else
struct sock_filter {
	uint16_t code;
	uint8_t jt, jf;
	uint32_t k;
};
struct sock_fprog {
	unsigned short len;
	struct sock_filter *filter;
};
struct seccomp_data {
	int nr;
	uint32_t arch;
	uint64_t instruction_pointer;
	uint64_t args[6];
};
#define BPF_LD 0x00
#define BPF_W 0x00
#define BPF_ABS 0x20
#define BPF_JMP 0x05
#define BPF_JA 0x00
#define BPF_JEQ 0x10
#define BPF_JGE 0x30
#define BPF_JSET 0x40
#define BPF_K 0x00
#define BPF_RET 0x06
#define BPF_STMT(code, k) { (unsigned short)(code), 0, 0, k }
#define BPF_JUMP(code, k, jt, jf) { (unsigned short)(code), jt, jf, k }
#define SECCOMP_MODE_FILTER 2
#define SECCOMP_RET_ALLOW 0x7fff0000u
#define SECCOMP_RET_ERRNO 0x00050000u
#define SECCOMP_RET_DATA 0x0000ffffu
#define AUDIT_ARCH_X86_64 0xc000003eu
#define AUDIT_ARCH_AARCH64 0xc00000b7u
#endif

#if defined(__x86_64__)
#define NOSUID_ARCH AUDIT_ARCH_X86_64
#define NOSUID_X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define NOSUID_ARCH AUDIT_ARCH_AARCH64
#else
#error "nosuid.c knows the seccomp architecture of x86_64 and aarch64 only"
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the filter reads a mode argument's low 32 bits at the argument's own offset"
#endif

/* Newer than some libcs' tables; each number is the same on every architecture. */
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif

#define NOSUID_DENY(e) (SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))

/* A call that sets a mode, and which argument holds it. */
struct nosuid_call {
	unsigned nr, arg;
};

static const struct nosuid_call nosuid_calls[] = {
#ifdef __NR_chmod
	{ __NR_chmod, 1 },
#endif
#ifdef __NR_open
	{ __NR_open, 2 },
#endif
#ifdef __NR_creat
	{ __NR_creat, 1 },
#endif
#ifdef __NR_mknod
	{ __NR_mknod, 1 },
#endif
	{ __NR_fchmod, 1 },     { __NR_fchmodat, 2 }, { __NR_fchmodat2, 2 },
	{ __NR_openat, 3 },     { __NR_mknodat, 2 },
};

/* Calls whose mode the filter cannot read: refused as if absent. */
static const unsigned nosuid_absent[] = { __NR_openat2, __NR_io_uring_setup };

#define NOSUID_NCALLS (sizeof(nosuid_calls) / sizeof(nosuid_calls[0]))
#define NOSUID_NABSENT (sizeof(nosuid_absent) / sizeof(nosuid_absent[0]))
/* The program's most: the head and tail (10 with x32's two), 3 per call, 2 per absent one. */
#define NOSUID_LEN (10 + 3 * NOSUID_NCALLS + 2 * NOSUID_NABSENT)

int sg_nosuid_apply(char *msg, size_t msglen)
{
	struct sock_filter f[NOSUID_LEN];
	struct sock_fprog prog;
	unsigned n = 0, check;
	int rc = -1;

	if (msglen)
		msg[0] = '\0';
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NOSUID_ARCH, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, NOSUID_DENY(ENOSYS));
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
#ifdef NOSUID_X32_BIT
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, NOSUID_X32_BIT, 0, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, NOSUID_DENY(ENOSYS));
#endif
	for (size_t i = 0; i < NOSUID_NABSENT; i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nosuid_absent[i],
						      0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, NOSUID_DENY(ENOSYS));
	}
	/* Each call loads its mode and jumps to the one check, after the allow. */
	check = n + 3 * (unsigned)NOSUID_NCALLS + 1;
	for (size_t i = 0; i < NOSUID_NCALLS; i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nosuid_calls[i].nr,
						      0, 2);
		f[n++] = (struct sock_filter)BPF_STMT(
			BPF_LD | BPF_W | BPF_ABS,
			offsetof(struct seccomp_data, args) + 8 * nosuid_calls[i].arg);
		f[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, check - (n + 1), 0, 0);
		n++;
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, S_ISUID | S_ISGID, 0, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, NOSUID_DENY(EPERM));
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = (unsigned short)n;
	prog.filter = f;
	/* Without no_new_privs an unprivileged process may not install it. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		if (msglen)
			snprintf(msg, msglen, "cannot install the seccomp filter that keeps "
				 "setuid and setgid bits off files: errno %d", errno);
		goto out;
	}
	rc = 0;
out:
	return rc;
}
