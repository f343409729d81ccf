/* Stand-in for glibc's test-skeleton.c, the older test wrapper that tests include as
   "../test-skeleton.c" after defining TEST_FUNCTION (an expression such as do_test ()),
   and optionally PREPARE and CLEANUP_HANDLER as expressions.  It turns them into the
   functions support/test-driver.c expects, as glibc's does.  */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <paths.h>
#include <search.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/param.h>
#include <time.h>
#include <stdint.h>

#include <support/support.h>
#include <support/check.h>
#include <support/xsignal.h>
#include <support/temp_file.h>

static int
legacy_test_function (int argc __attribute__ ((unused)),
                      char **argv __attribute__ ((unused)))
{
#ifdef TEST_FUNCTION
  return TEST_FUNCTION;
# undef TEST_FUNCTION
#else
  return do_test (argc, argv);
#endif
}
#define TEST_FUNCTION_ARGV legacy_test_function

#ifdef PREPARE
static void
legacy_prepare_function (int argc __attribute__ ((unused)),
                         char **argv __attribute__ ((unused)))
{
  PREPARE (argc, argv);
}
# undef PREPARE
# define PREPARE legacy_prepare_function
#endif

#ifdef CLEANUP_HANDLER
static void
legacy_cleanup_handler_function (void)
{
  CLEANUP_HANDLER;
}
# undef CLEANUP_HANDLER
# define CLEANUP_HANDLER legacy_cleanup_handler_function
#endif

#include <support/test-driver.c>

#ifdef _PTHREAD_H
# include <support/xthread.h>
#endif
