/* Stand-in for glibc's support/xunistd.h: system calls that exit with status 1 on failure.  */
#ifndef SUPPORT_XUNISTD_H
#define SUPPORT_XUNISTD_H

#include <sys/cdefs.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <unistd.h>

__BEGIN_DECLS

pid_t xfork (void);
int xopen (const char *path, int flags, mode_t);
void *xmmap (void *addr, size_t length, int prot, int flags, int fd);
void xmunmap (void *addr, size_t length);
long xsysconf (int name);

__END_DECLS

#endif /* SUPPORT_XUNISTD_H */
