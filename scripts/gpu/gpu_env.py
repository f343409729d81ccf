# What the GPU scripts share: one clear line instead of a traceback when what they need is
# missing, with the exit statuses scripts/gpu-check.sh reads (the CUDA programs use 3 too):
#   3  no driver or no device: "NO_DEVICE <call>: <reason>" on stdout, from the first device call;
#   4  a Python package is missing: one line on stderr;
#   5  a Python package is there but fails to import (a library it loads is missing, say): one
#      line on stderr;
#   2  RESIZEALLOC_LIB unset or not loadable: one line on stderr.
# Errors after the first device call are real failures and keep their tracebacks.
import ctypes
import importlib
import os
import sys

NO_DEVICE = 3
NO_PACKAGE = 4
IMPORT_FAILED = 5


def _script():
    return os.path.basename(sys.argv[0])


def _first_line(err):
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def need(module, package):
    """Imports `module`, or exits with one line naming `package` (pip's name)."""
    return need_any([module], package)


def need_any(modules, package):
    """The first of `modules` that imports (for a package that moved a module), as `need`."""
    err = None
    for module in modules:
        try:
            return importlib.import_module(module)
        except ImportError as e:
            err = e
        except Exception as e:  # installed, but its import failed
            print("%s: importing %s failed: %s: %s" % (_script(), module, type(e).__name__, _first_line(e)), file=sys.stderr)
            sys.exit(IMPORT_FAILED)
    print("%s: needs %s (pip install %s): %s" % (_script(), " or ".join(modules), package, _first_line(err)), file=sys.stderr)
    sys.exit(NO_PACKAGE)


def no_device(call, reason):
    """The first device call failed for want of a driver or a device: one line, NO_DEVICE."""
    print("NO_DEVICE %s: %s" % (call, _first_line(reason)))
    sys.stdout.flush()
    sys.exit(NO_DEVICE)


def first_device_call(call, fn):
    """Runs `fn()`, the script's first device call; any exception from it means no device."""
    try:
        return fn()
    except Exception as e:  # each framework raises its own type for a missing driver
        no_device(call, e)


def resize_lib():
    """libresizealloc.so, named by RESIZEALLOC_LIB."""
    path = os.environ.get("RESIZEALLOC_LIB")
    if not path:
        print("%s: RESIZEALLOC_LIB must name libresizealloc.so" % _script(), file=sys.stderr)
        sys.exit(2)
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        print("%s: cannot load RESIZEALLOC_LIB: %s" % (_script(), _first_line(e)), file=sys.stderr)
        sys.exit(2)
