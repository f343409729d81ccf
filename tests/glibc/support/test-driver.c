/* Stand-in for glibc's support/test-driver.c, included at the end of a test: defines main,
   which hands the test function and the settings below to support_test_main (support.c).

   The test defines do_test (int do_test (void)), or TEST_FUNCTION (an expression or name of
   that type), or TEST_FUNCTION_ARGV (int f (int, char **)); optionally PREPARE,
   CLEANUP_HANDLER, EXPECTED_SIGNAL, EXPECTED_STATUS, TIMEOUT (seconds), TEST_NO_MALLOPT and
   TEST_NO_SETVBUF, as in glibc.  */

#include <support/test-driver.h>

#include <string.h>

int
main (int argc, char **argv)
{
  struct test_config test_config;
  memset (&test_config, 0, sizeof (test_config));

#ifdef PREPARE
  test_config.prepare_function = (PREPARE);
#endif

#if defined (TEST_FUNCTION) && defined (TEST_FUNCTION_ARGV)
# error TEST_FUNCTION and TEST_FUNCTION_ARGV cannot be defined at the same time
#endif
#if defined (TEST_FUNCTION)
  test_config.test_function = TEST_FUNCTION;
#elif defined (TEST_FUNCTION_ARGV)
  test_config.test_function_argv = TEST_FUNCTION_ARGV;
#else
  test_config.test_function = do_test;
#endif

#ifdef CLEANUP_HANDLER
  test_config.cleanup_function = CLEANUP_HANDLER;
#endif
#ifdef EXPECTED_SIGNAL
  test_config.expected_signal = (EXPECTED_SIGNAL);
#endif
#ifdef EXPECTED_STATUS
  test_config.expected_status = (EXPECTED_STATUS);
#endif
#ifdef TEST_NO_MALLOPT
  test_config.no_mallopt = 1;
#endif
#ifdef TEST_NO_SETVBUF
  test_config.no_setvbuf = 1;
#endif
#ifdef TIMEOUT
  test_config.timeout = TIMEOUT;
#endif

  return support_test_main (argc, argv, &test_config);
}
