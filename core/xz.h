/*
 * xz.h: reading text that may be xz-compressed. The study's corpus ships as
 * data/tinystories.txt.xz (1.5 MB instead of 7.3 MB) and is read in place
 * through liblzma, so a fresh clone needs no unpacking step and no second
 * copy on disk. The file was written with `xz --check=sha256` as a single
 * block, so liblzma verifies the SHA-256 of the whole text on every read.
 *
 * Non-goals: writing xz, streaming decompression (callers want whole files).
 */
#ifndef XSA_XZ_H
#define XSA_XZ_H

#include <stddef.h>

/* 1 if buf starts with the xz stream magic (FD 37 7A 58 5A 00). */
int xsa_xz_is_xz(const void *buf, size_t n);

/* Decompresses a whole .xz image (one or more concatenated streams) held in
 * memory: malloc'd, NUL-terminated beyond *n_out. NULL + xsa_error (naming
 * `what`) on a corrupt, truncated or check-failing stream, or when the output
 * would exceed max_out bytes (0: no limit but memory). */
char *xsa_xz_decode(const void *in, size_t n, size_t max_out, const char *what, size_t *n_out);

/* Bounded resources (the rule): decompression never produces more than a
 * size limit. xsa_xz_decode refuses, before it allocates any output, an
 * image whose indexes declare more than max_out bytes, and stops with an
 * error once the output would pass max_out whatever the indexes say; so
 * memory stays below the input + max_out + 1 + the decoder's dictionary
 * (at most 512 MiB). xsa_read_text applies the process-wide limit below
 * (XSA_XZ_DEFAULT_LIMIT, 256 MiB, 35 times the study's corpus; the Lua
 * module sets it from $XSA_MAX_TEXT_BYTES or xsa.data.max_text_bytes). */
#define XSA_XZ_DEFAULT_LIMIT ((size_t)256 << 20)
size_t xsa_xz_limit(void);
/* 0, or -1 + error for 0. Not thread-safe: set it before reading. */
int xsa_xz_set_limit(size_t max_out);

/* The whole content of path, decompressed when the file is xz (recognised by
 * its magic bytes, whatever its name) within xsa_xz_limit() bytes:
 * malloc'd, NUL-terminated beyond *n. NULL + xsa_error naming the path. */
char *xsa_read_text(const char *path, size_t *n);

#endif
