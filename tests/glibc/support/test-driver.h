/* Stand-in for glibc's support/test-driver.h: the interface between a test's do_test and the
   driver in support.c (support_test_main).  */
#ifndef SUPPORT_TEST_DRIVER_H
#define SUPPORT_TEST_DRIVER_H

#include <sys/cdefs.h>

__BEGIN_DECLS

struct test_config
{
  void (*prepare_function) (int argc, char **argv);
  int (*test_function) (void);
  int (*test_function_argv) (int argc, char **argv);
  void (*cleanup_function) (void);
  int expected_status;   /* Expected exit status.  */
  int expected_signal;   /* If non-zero, expect termination by signal.  */
  int timeout;           /* Seconds; 0 for DEFAULT_TIMEOUT.  */
  char no_mallopt;       /* Skip mallopt (M_PERTURB, 42).  */
  char no_setvbuf;       /* Leave standard output buffered.  */
};

enum
  {
    /* Test exit status which indicates that the feature is unsupported.  */
    EXIT_UNSUPPORTED = 77,

    /* Default timeout is twenty seconds.  */
    DEFAULT_TIMEOUT = 20,
  };

/* Run the test described by CONFIG (see support.c) and return the exit status.  */
int support_test_main (int argc, char **argv, const struct test_config *);

extern unsigned int test_verbose;

__END_DECLS

#endif /* SUPPORT_TEST_DRIVER_H */
