/* Runs glibc's malloc/mallocbug.c under the test driver.  That program has its own main,
   prints "PASS: ..." or "FAIL: ..." and exits 0 either way; here its main becomes a function
   that do_test calls, and a FAIL line fails the test.  */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int mallocbug_failed;

static int
mallocbug_printf (const char *format, ...)
{
  if (strncmp (format, "FAIL", 4) == 0)
    mallocbug_failed = 1;
  va_list ap;
  va_start (ap, format);
  int ret = vprintf (format, ap);
  va_end (ap);
  return ret;
}

#define main mallocbug_main
#define printf mallocbug_printf
#include "malloc/mallocbug.c"
#undef printf
#undef main
#undef size_t

static int
do_test (void)
{
  mallocbug_main (0, NULL);
  return mallocbug_failed;
}

#include <support/test-driver.c>
