/* Stand-in for glibc's support/xthread.h: pthread calls that exit with status 1 on failure.  */
#ifndef SUPPORT_THREAD_H
#define SUPPORT_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/cdefs.h>

__BEGIN_DECLS

pthread_t xpthread_create (pthread_attr_t *attr,
                           void *(*thread_func) (void *), void *closure);
void *xpthread_join (pthread_t thr);
void xpthread_kill (pthread_t thr, int signo);
void xpthread_barrier_init (pthread_barrier_t *barrier,
                            pthread_barrierattr_t *attr, unsigned int count);
void xpthread_barrier_destroy (pthread_barrier_t *barrier);
/* Returns 1 in the thread that gets PTHREAD_BARRIER_SERIAL_THREAD, else 0.  */
int xpthread_barrier_wait (pthread_barrier_t *barrier);
void xpthread_barrierattr_init (pthread_barrierattr_t *attr);
void xpthread_barrierattr_setpshared (pthread_barrierattr_t *attr, int pshared);
void xpthread_barrierattr_destroy (pthread_barrierattr_t *attr);

__END_DECLS

#endif /* SUPPORT_THREAD_H */
