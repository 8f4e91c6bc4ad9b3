/* files.h -- reading a whole file in tests. */
#ifndef TS_TEST_FILES_H
#define TS_TEST_FILES_H

#include <stddef.h>

/* The file's bytes plus a terminating NUL (so text can be searched), its
 * length in *n (may be NULL); malloc'd, NULL if it cannot be read. */
char *test_read_file(const char *path, size_t *n);

#endif
