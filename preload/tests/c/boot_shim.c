/* boot_shim: preloaded in front of libresizealloc.so, it stands in for dlsym so that the
 * library's own lookup of the next allocator (dlsym(RTLD_NEXT, "malloc")) calls malloc while
 * that lookup is in progress. The library serves such calls from its bootstrap buffer; the
 * shim keeps two of those blocks for the program (boot_shim_blocks, each BOOT_SHIM_SIZE bytes
 * of 0x5a) so that it can check what the malloc family does with them. Real lookups are
 * answered by glibc's dlsym; RTLD_NEXT (which only the library uses) by libc itself, the
 * object after the library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <stdlib.h>

#define BOOT_SHIM_SIZE 100
void *boot_shim_blocks[2];
size_t boot_shim_size = BOOT_SHIM_SIZE;

typedef void *(*dlsym_fn)(void *, const char *);

static dlsym_fn glibc_dlsym(void) {
    static dlsym_fn f;
    if (!f) f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f) f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return f;
}

void *dlsym(void *handle, const char *name) {
    if (handle != RTLD_NEXT) return glibc_dlsym()(handle, name);
    if (!boot_shim_blocks[0] && strcmp(name, "malloc") == 0) {
        for (int i = 0; i < 2; i++) {
            boot_shim_blocks[i] = malloc(BOOT_SHIM_SIZE);
            if (boot_shim_blocks[i]) memset(boot_shim_blocks[i], 0x5a, BOOT_SHIM_SIZE);
        }
    }
    static void *libc;
    if (!libc) libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    return libc ? glibc_dlsym()(libc, name) : NULL;
}
