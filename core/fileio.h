/*
 * fileio.h: atomic file writes shared by checkpoints, token caches and
 * results: write to "PATH.tmp.<pid>" in the same folder, fflush + fsync,
 * rename over PATH. A crash or error leaves the old PATH untouched and no
 * temporary file behind.
 */
#ifndef XSA_FILEIO_H
#define XSA_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct xsa_atomic_file {
    FILE *fp;
    char *path;
    char *tmp_path;
} xsa_atomic_file;

/* Opens the temporary file for writing ("wb"); -1 with xsa_error on failure. */
int xsa_atomic_open(xsa_atomic_file *af, const char *path);
/* Flushes, fsyncs, closes and renames; -1 (and the temporary removed) on any
 * write error seen so far. Always releases af. */
int xsa_atomic_commit(xsa_atomic_file *af);
/* Closes and removes the temporary file, leaving PATH as it was. */
void xsa_atomic_abort(xsa_atomic_file *af);
/* Whole buffer in one call. */
int xsa_atomic_write(const char *path, const void *data, size_t n);
/* The shortest decimal text (%.15g, %.16g or %.17g) that reads back as
 * exactly v, so metadata says "0.3" rather than "0.29999999999999999". */
void xsa_format_double(char *buf, size_t n, double v);
/* Opens path read-only if it is a regular file: a directory, FIFO, device
 * or socket is refused with a message (reading one would hang or never
 * end). The descriptor (close-on-exec, blocking) or -1 + xsa_error. */
int xsa_open_regular(const char *path);
/* Reads a whole regular file (malloc'd, NUL-terminated beyond *n); NULL +
 * xsa_error. */
char *xsa_read_file(const char *path, size_t *n);
/* The identity of a regular file's bytes: their CRC-64 (ECMA-182, as xz
 * uses; liblzma computes it) and their count, streamed in 1 MiB pieces. A
 * content identity, not a defence against a forger: it tells the committed
 * corpus from an edited or truncated one. 0, or -1 + xsa_error. */
int xsa_file_crc64(const char *path, uint64_t *crc, uint64_t *size);
/* The names of the regular files in dir (no "." entries, no directories,
 * no symbolic links), sorted bytewise, as one malloc'd array of *n
 * malloc'd strings; free with xsa_free_names. NULL + xsa_error when dir
 * cannot be read (an empty folder gives a non-NULL array with *n = 0). At
 * most max names: a folder holding more is an error, not a truncation. */
char **xsa_list_files(const char *dir, size_t max, size_t *n);
/* The same of dir's folders (no "." entries, no links to folders). */
char **xsa_list_dirs(const char *dir, size_t max, size_t *n);
void xsa_free_names(char **names, size_t n);

#endif
