/* Stand-in for glibc's support/support.h: the helpers of glibc's test suite that the
   upstream tests in ../malloc use (implemented in support.c).  */
#ifndef SUPPORT_H
#define SUPPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/cdefs.h>
#include <sys/stat.h>
#include <sys/types.h>

__BEGIN_DECLS

/* Write MESSAGE to standard output with write (async-signal-safe; errno is preserved).  */
void write_message (const char *message);

/* Print "error: FUNCTION: allocation failed for SIZE bytes" and exit with status 1.  */
void oom_error (const char *function, size_t size) __attribute__ ((noreturn));

/* The malloc family, exiting with status 1 on failure.  */
void *xmalloc (size_t) __attribute_malloc__ __attribute_alloc_size__ ((1));
void *xcalloc (size_t n, size_t s) __attribute_malloc__ __attribute_alloc_size__ ((1, 2));
void *xrealloc (void *o, size_t n) __attribute_alloc_size__ ((2));
char *xstrdup (const char *) __attribute_malloc__;

/* Memory shared with forked children (an anonymous MAP_SHARED mapping).  */
void *support_shared_allocate (size_t size);
void support_shared_free (void *);

/* Redirect standard error to /dev/null.  */
void ignore_stderr (void);

__END_DECLS

#endif /* SUPPORT_H */
