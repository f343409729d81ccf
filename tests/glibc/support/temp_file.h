/* Stand-in for glibc's support/temp_file.h.  */
#ifndef SUPPORT_TEMP_FILE_H
#define SUPPORT_TEMP_FILE_H

#include <sys/cdefs.h>

__BEGIN_DECLS

/* Create a temporary file named after BASE in $TMPDIR (or /tmp), open for reading and
   writing, and return its descriptor (-1 on error).  If FILENAME is not NULL, *FILENAME
   receives its name, allocated with malloc.  The file is removed when the process that
   created it exits.  */
int create_temp_file (const char *base, char **filename);

__END_DECLS

#endif /* SUPPORT_TEMP_FILE_H */
