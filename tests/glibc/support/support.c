/* A small stand-in for glibc's support/ library (libsupport.a): the parts that the upstream
   malloc tests in ../malloc and ../malloc-2.42 use, written after glibc 2.36's
   support/support_test_main.c, support_record_failure.c, check.c, xmalloc.c, xpthread_*.c,
   temp_file.c and their siblings.

   The test driver (support_test_main) works as glibc's: it calls mallopt (M_PERTURB, 42)
   unless the test opts out, makes standard output unbuffered, then forks; the child puts
   itself in its own process group and runs the test function, the parent waits for it with
   a timeout of TIMEOUT (or DEFAULT_TIMEOUT) seconds times $TIMEOUTFACTOR.  The exit status
   is the test's: 0 pass, 1 fail, 77 unsupported; failures recorded with
   support_record_failure (TEST_VERIFY, TEST_COMPARE, ...) anywhere, forked children
   included, turn a pass into 1.  --direct runs the test in the driver's process, without
   fork or timeout (for a debugger).

   Two differences from glibc's, for scripts/glibc_tests.sh:
   - A timeout, or SIGTERM/SIGINT to the driver, kills the test's process group, prints
     "Timed out: ..." and exits with status 124 (timeout(1)'s), not 1.
   - With GLIBC_TEST_REGION=1 in the environment, the process that runs the test function
     (the forked child, or the driver itself with --direct) enters a libresizealloc region
     just before it and leaves it just after: resize_region_begin and resize_region_end
     are looked up with dlsym (RTLD_DEFAULT), so the same binary serves runs with and
     without the library.  The region must still be at depth 1 when the test function
     returns and must end cleanly; otherwise the run fails.  */

#include <support/check.h>
#include <support/support.h>
#include <support/temp_file.h>
#include <support/test-driver.h>
#include <support/xsignal.h>
#include <support/xthread.h>
#include <support/xunistd.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Failure recording.  */

struct failure_state
{
  unsigned int failed;
};

static struct failure_state *failure_state;

static void
__attribute__ ((constructor))
init_failure_state (void)
{
  void *p = mmap (NULL, sizeof (*failure_state), PROT_READ | PROT_WRITE,
                  MAP_ANONYMOUS | MAP_SHARED, -1, 0);
  if (p == MAP_FAILED)
    {
      write_message ("error: could not map the failure counter\n");
      _exit (1);
    }
  failure_state = p;
}

void
support_record_failure (void)
{
  if (failure_state == NULL)
    {
      write_message ("error: support_record_failure called without initialization\n");
      _exit (1);
    }
  __atomic_add_fetch (&failure_state->failed, 1, __ATOMIC_RELAXED);
}

int
support_report_failure (int status)
{
  unsigned int failed = __atomic_load_n (&failure_state->failed, __ATOMIC_RELAXED);
  if (failed == 1)
    puts ("error: 1 test failure");
  else if (failed != 0)
    printf ("error: %u test failures\n", failed);
  if ((status == 0 || status == EXIT_UNSUPPORTED) && failed != 0)
    return 1;
  return status;
}

static void
print_failure (const char *file, int line, const char *format, va_list ap)
{
  int saved_errno = errno;
  printf ("error: %s:%d: ", file, line);
  errno = saved_errno; /* For %m in FORMAT.  */
  vprintf (format, ap);
  puts ("");
}

int
support_print_failure_impl (const char *file, int line, const char *format, ...)
{
  support_record_failure ();
  va_list ap;
  va_start (ap, format);
  print_failure (file, line, format, ap);
  va_end (ap);
  return 1;
}

void
support_exit_failure_impl (int status, const char *file, int line, const char *format, ...)
{
  if (status != EXIT_SUCCESS && status != EXIT_UNSUPPORTED)
    support_record_failure ();
  va_list ap;
  va_start (ap, format);
  print_failure (file, line, format, ap);
  va_end (ap);
  exit (status);
}

void
support_test_verify_impl (const char *file, int line, const char *expr)
{
  int saved_errno = errno;
  fflush (stdout);
  support_record_failure ();
  printf ("error: %s:%d: not true: %s\n", file, line, expr);
  errno = saved_errno;
}

void
support_test_verify_exit_impl (int status, const char *file, int line, const char *expr)
{
  support_test_verify_impl (file, line, expr);
  exit (status);
}

static void
report_value (const char *which, long long value, int positive, int size)
{
  printf ("  %s: ", which);
  if (positive)
    printf ("%llu", (unsigned long long) value);
  else
    printf ("%lld", value);
  unsigned long long mask = size >= 8 ? ~0ULL : (1ULL << (8 * size)) - 1;
  printf (" (0x%llx)\n", (unsigned long long) value & mask);
}

void
support_test_compare_failure (const char *file, int line,
                              const char *left_expr, long long left_value,
                              int left_positive, int left_size,
                              const char *right_expr, long long right_value,
                              int right_positive, int right_size)
{
  int saved_errno = errno;
  support_record_failure ();
  if (left_size != right_size)
    printf ("error: %s:%d: numeric comparison failure (widths %d and %d)\n",
            file, line, left_size * 8, right_size * 8);
  else
    printf ("error: %s:%d: numeric comparison failure\n", file, line);
  report_value (" left", left_value, left_positive, left_size);
  printf ("    from: %s\n", left_expr);
  report_value ("right", right_value, right_positive, right_size);
  printf ("    from: %s\n", right_expr);
  errno = saved_errno;
}

/* Helpers.  */

void
write_message (const char *message)
{
  int saved_errno = errno;
  ssize_t unused __attribute__ ((unused));
  unused = write (STDOUT_FILENO, message, strlen (message));
  errno = saved_errno;
}

void
oom_error (const char *function, size_t size)
{
  printf ("error: %s: allocation of %zu bytes failed\n", function, size);
  exit (1);
}

void *
xmalloc (size_t n)
{
  void *p = malloc (n);
  if (p == NULL)
    oom_error ("malloc", n);
  return p;
}

void *
xcalloc (size_t n, size_t s)
{
  void *p = calloc (n, s);
  if (p == NULL)
    oom_error ("calloc", n * s);
  return p;
}

void *
xrealloc (void *o, size_t n)
{
  void *p = realloc (o, n);
  if (p == NULL && n != 0)
    oom_error ("realloc", n);
  return p;
}

char *
xstrdup (const char *s)
{
  char *p = strdup (s);
  if (p == NULL)
    oom_error ("strdup", strlen (s) + 1);
  return p;
}

struct shared_header
{
  size_t total_size;
  char data[] __attribute__ ((aligned (__alignof__ (max_align_t))));
};

void *
support_shared_allocate (size_t size)
{
  size_t total_size = size + offsetof (struct shared_header, data);
  if (total_size < size)
    oom_error (__func__, size);
  struct shared_header *result = xmmap (NULL, total_size, PROT_READ | PROT_WRITE,
                                        MAP_ANONYMOUS | MAP_SHARED, -1);
  result->total_size = total_size;
  return &result->data;
}

void
support_shared_free (void *data)
{
  struct shared_header *header = (void *) ((char *) data - offsetof (struct shared_header, data));
  xmunmap (header, header->total_size);
}

void
ignore_stderr (void)
{
  int fd = open ("/dev/null", O_WRONLY);
  if (fd >= 0)
    {
      dup2 (fd, STDERR_FILENO);
      close (fd);
    }
}

/* System calls.  */

static void
__attribute__ ((noreturn))
fail_errno (const char *what)
{
  printf ("error: %s: %m\n", what);
  exit (1);
}

pid_t
xfork (void)
{
  pid_t pid = fork ();
  if (pid < 0)
    fail_errno ("fork");
  return pid;
}

int
xopen (const char *path, int flags, mode_t mode)
{
  int fd = open (path, flags, mode);
  if (fd < 0)
    {
      printf ("error: open (\"%s\", 0x%x, 0%o): %m\n", path, flags, mode);
      exit (1);
    }
  return fd;
}

void *
xmmap (void *addr, size_t length, int prot, int flags, int fd)
{
  void *p = mmap (addr, length, prot, flags, fd, 0);
  if (p == MAP_FAILED)
    {
      printf ("error: mmap of %zu bytes, prot=0x%x, flags=0x%x: %m\n", length, prot, flags);
      exit (1);
    }
  return p;
}

void
xmunmap (void *addr, size_t length)
{
  if (munmap (addr, length) != 0)
    fail_errno ("munmap");
}

long
xsysconf (int name)
{
  errno = 0;
  long result = sysconf (name);
  if (result == -1)
    {
      if (errno != 0)
        fail_errno ("sysconf");
      printf ("error: sysconf (%d): unsupported\n", name);
      exit (77);
    }
  return result;
}

sighandler_t
xsignal (int sig, sighandler_t handler)
{
  sighandler_t old = signal (sig, handler);
  if (old == SIG_ERR)
    fail_errno ("signal");
  return old;
}

/* pthread calls return an error number instead of setting errno.  */
static void
check_pthread (const char *function, int ret)
{
  if (ret != 0)
    {
      errno = ret;
      printf ("error: %s: %m\n", function);
      exit (1);
    }
}

pthread_t
xpthread_create (pthread_attr_t *attr, void *(*thread_func) (void *), void *closure)
{
  pthread_t thr;
  check_pthread ("pthread_create", pthread_create (&thr, attr, thread_func, closure));
  return thr;
}

void *
xpthread_join (pthread_t thr)
{
  void *result;
  check_pthread ("pthread_join", pthread_join (thr, &result));
  return result;
}

void
xpthread_kill (pthread_t thr, int signo)
{
  check_pthread ("pthread_kill", pthread_kill (thr, signo));
}

void
xpthread_barrier_init (pthread_barrier_t *barrier, pthread_barrierattr_t *attr,
                       unsigned int count)
{
  check_pthread ("pthread_barrier_init", pthread_barrier_init (barrier, attr, count));
}

void
xpthread_barrier_destroy (pthread_barrier_t *barrier)
{
  check_pthread ("pthread_barrier_destroy", pthread_barrier_destroy (barrier));
}

int
xpthread_barrier_wait (pthread_barrier_t *barrier)
{
  int ret = pthread_barrier_wait (barrier);
  if (ret != 0 && ret != PTHREAD_BARRIER_SERIAL_THREAD)
    check_pthread ("pthread_barrier_wait", ret);
  return ret == PTHREAD_BARRIER_SERIAL_THREAD;
}

void
xpthread_barrierattr_init (pthread_barrierattr_t *attr)
{
  check_pthread ("pthread_barrierattr_init", pthread_barrierattr_init (attr));
}

void
xpthread_barrierattr_setpshared (pthread_barrierattr_t *attr, int pshared)
{
  check_pthread ("pthread_barrierattr_setpshared",
                 pthread_barrierattr_setpshared (attr, pshared));
}

void
xpthread_barrierattr_destroy (pthread_barrierattr_t *attr)
{
  check_pthread ("pthread_barrierattr_destroy", pthread_barrierattr_destroy (attr));
}

/* Temporary files, removed by the process that created them when it exits (not by the
   children it forks, which exit too).  */

static const char *test_dir;
static pid_t temp_files_owner;
static char *temp_files[16];
static int temp_file_count;

static void
delete_temp_files (void)
{
  if (getpid () != temp_files_owner)
    return;
  for (int i = 0; i < temp_file_count; ++i)
    unlink (temp_files[i]);
}

int
create_temp_file (const char *base, char **filename)
{
  if (temp_file_count == (int) (sizeof (temp_files) / sizeof (temp_files[0])))
    {
      printf ("error: too many temporary files\n");
      return -1;
    }
  const char *dir = test_dir != NULL ? test_dir : "/tmp";
  char *name = xmalloc (strlen (dir) + strlen (base) + sizeof ("/XXXXXX"));
  sprintf (name, "%s/%sXXXXXX", dir, base);
  int fd = mkstemp (name);
  if (fd < 0)
    {
      printf ("error: cannot create temporary file %s: %m\n", name);
      free (name);
      return -1;
    }
  if (temp_file_count == 0)
    {
      temp_files_owner = getpid ();
      atexit (delete_temp_files);
    }
  temp_files[temp_file_count++] = xstrdup (name);
  if (filename != NULL)
    *filename = name;
  else
    free (name);
  return fd;
}

/* The test driver.  */

unsigned int test_verbose;

static pid_t test_pid;
static void (*cleanup_function) (void);

/* SIGALRM (the timeout), SIGINT or SIGTERM (a timeout of the script, or ^C) in the driver:
   kill the test's process group and exit.  */
static void
__attribute__ ((noreturn))
signal_handler (int sig)
{
  kill (-test_pid, SIGKILL);
  kill (test_pid, SIGKILL);
  int status;
  pid_t killed = 0;
  for (int i = 0; i < 5 && killed == 0; ++i)
    {
      killed = waitpid (test_pid, &status, WNOHANG | WUNTRACED);
      if (killed == 0)
        nanosleep (&(struct timespec) { 0, 100000000 }, NULL);
    }
  if (cleanup_function != NULL)
    cleanup_function ();
  if (sig == SIGALRM)
    puts ("Timed out: killed the child process");
  else
    printf ("Timed out: %s: killed the child process\n", strsignal (sig));
  exit (124);
}

/* The libresizealloc region around the test function (GLIBC_TEST_REGION).  */
static void (*region_begin) (void);
static int (*region_end) (void);
static int (*region_depth) (void);

static bool
region_requested (void)
{
  const char *s = getenv ("GLIBC_TEST_REGION");
  return s != NULL && s[0] != '\0' && strcmp (s, "0") != 0;
}

static void
enter_region (void)
{
  region_begin = (void (*) (void)) dlsym (RTLD_DEFAULT, "resize_region_begin");
  region_end = (int (*) (void)) dlsym (RTLD_DEFAULT, "resize_region_end");
  region_depth = (int (*) (void)) dlsym (RTLD_DEFAULT, "resize_region_depth");
  if (region_begin == NULL || region_end == NULL || region_depth == NULL)
    {
      puts ("error: GLIBC_TEST_REGION is set but resize_region_begin, resize_region_end or"
            " resize_region_depth is not in the process (libresizealloc.so not preloaded?)");
      exit (1);
    }
  region_begin ();
  int depth = region_depth ();
  if (depth != 1)
    {
      printf ("error: region depth %d after resize_region_begin, not 1\n", depth);
      exit (1);
    }
}

static void
leave_region (void)
{
  int depth = region_depth ();
  if (depth != 1)
    {
      printf ("error: region depth %d when the test function returned, not 1\n", depth);
      support_record_failure ();
      return;
    }
  if (region_end () != 0)
    {
      puts ("error: resize_region_end failed after the test function");
      support_record_failure ();
    }
}

static int
run_test_function (int argc, char **argv, const struct test_config *config)
{
  bool region = region_requested ();
  if (region)
    enter_region ();
  int status;
  if (config->test_function != NULL)
    status = config->test_function ();
  else if (config->test_function_argv != NULL)
    status = config->test_function_argv (argc, argv);
  else
    {
      puts ("error: no test function defined");
      exit (1);
    }
  if (region)
    leave_region ();
  return status;
}

int
support_test_main (int argc, char **argv, const struct test_config *config)
{
  static const struct option options[] =
    {
      { "verbose", no_argument, NULL, 'v' },
      { "direct", no_argument, NULL, 'd' },
      { "test-dir", required_argument, NULL, 't' },
      { NULL, 0, NULL, 0 }
    };
  int direct = 0;
  cleanup_function = config->cleanup_function;

  if (!config->no_mallopt)
    /* Make uses of freed and uninitialized memory known, as glibc's driver does.  */
    mallopt (M_PERTURB, 42);

  int opt;
  while ((opt = getopt_long (argc, argv, "+", options, NULL)) != -1)
    switch (opt)
      {
      case 'v':
        ++test_verbose;
        break;
      case 'd':
        direct = 1;
        break;
      case 't':
        test_dir = optarg;
        break;
      default:
        printf ("usage: %s [--direct] [--verbose] [--test-dir DIR]\n", argv[0]);
        exit (1);
      }

  unsigned int timeoutfactor = 1;
  const char *envstr_timeoutfactor = getenv ("TIMEOUTFACTOR");
  if (envstr_timeoutfactor != NULL)
    {
      char *end;
      unsigned long f = strtoul (envstr_timeoutfactor, &end, 0);
      if (*end == '\0' && end != envstr_timeoutfactor && f > 1)
        timeoutfactor = f;
    }

  if (test_dir != NULL)
    {
      setenv ("TMPDIR", test_dir, 1);
      if (chdir (test_dir) < 0)
        fail_errno ("chdir");
    }
  else
    {
      test_dir = getenv ("TMPDIR");
      if (test_dir == NULL || test_dir[0] == '\0')
        test_dir = "/tmp";
    }

  int timeout = config->timeout != 0 ? config->timeout : DEFAULT_TIMEOUT;

  if (!config->no_setvbuf)
    setvbuf (stdout, NULL, _IONBF, 0);

  /* Options consumed: the test sees argv[0] followed by the remaining arguments.  */
  argv[optind - 1] = argv[0];
  argv += optind - 1;
  argc -= optind - 1;

  if (config->prepare_function != NULL)
    config->prepare_function (argc, argv);

  if (direct)
    return support_report_failure (run_test_function (argc, argv, config));

  test_pid = fork ();
  if (test_pid == 0)
    {
      /* No core dumps; a process group of its own, so that the timeout kills whatever the
         test forked too.  */
      struct rlimit core_limit = { 0, 0 };
      setrlimit (RLIMIT_CORE, &core_limit);
      if (setpgid (0, 0) != 0)
        printf ("Failed to set the process group ID: %m\n");
      exit (run_test_function (argc, argv, config));
    }
  else if (test_pid < 0)
    fail_errno ("fork");

  signal (SIGALRM, signal_handler);
  alarm (timeout * timeoutfactor);
  signal (SIGINT, signal_handler);
  signal (SIGTERM, signal_handler);

  int status;
  pid_t termpid = TEMP_FAILURE_RETRY (waitpid (test_pid, &status, 0));
  if (termpid == -1)
    fail_errno ("waitpid");
  if (termpid != test_pid)
    {
      printf ("Oops, wrong test program terminated: expected %ld, got %ld\n",
              (long int) test_pid, (long int) termpid);
      exit (1);
    }

  if (WIFEXITED (status))
    {
      if (config->expected_status == 0)
        {
          if (config->expected_signal == 0)
            return support_report_failure (WEXITSTATUS (status));
          printf ("Expected signal '%s' from child, got none\n",
                  strsignal (config->expected_signal));
          exit (1);
        }
      if (WEXITSTATUS (status) != config->expected_status)
        {
          printf ("Expected status %d, got %d\n",
                  config->expected_status, WEXITSTATUS (status));
          exit (1);
        }
      return support_report_failure (0);
    }
  if (config->expected_signal == 0)
    {
      printf ("Didn't expect signal from child: got `%s'\n", strsignal (WTERMSIG (status)));
      exit (1);
    }
  if (WTERMSIG (status) != config->expected_signal)
    {
      printf ("Incorrect signal from child: got `%s', need `%s'\n",
              strsignal (WTERMSIG (status)), strsignal (config->expected_signal));
      exit (1);
    }
  return support_report_failure (0);
}
