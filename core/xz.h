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

/* The whole content of path, decompressed when the file is xz (recognised by
 * its magic bytes, whatever its name): malloc'd, NUL-terminated beyond *n.
 * NULL + xsa_error naming the path. */
char *xsa_read_text(const char *path, size_t *n);

#endif
