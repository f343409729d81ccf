/* Stand-in for the one macro of glibc's internal include/libc-symbols.h that
   ../malloc-2.42/tst-aligned_alloc-lib.c uses.  */
#ifndef _LIBC_SYMBOLS_H
#define _LIBC_SYMBOLS_H 1

/* Define ALIASNAME as another name for the function NAME.  */
#define strong_alias(name, aliasname) \
  extern __typeof (name) aliasname __attribute__ ((alias (#name))) \
    __attribute__ ((copy (name)));

#endif /* libc-symbols.h */
