/* Stand-in for glibc's support/xsignal.h.  */
#ifndef SUPPORT_SIGNAL_H
#define SUPPORT_SIGNAL_H

#include <signal.h>
#include <sys/cdefs.h>

__BEGIN_DECLS

/* signal, exiting with status 1 on failure.  */
sighandler_t xsignal (int sig, sighandler_t handler);

__END_DECLS

#endif /* SUPPORT_SIGNAL_H */
