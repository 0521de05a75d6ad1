/*
 * safetensors.h: read and write the safetensors format
 * (8-byte little-endian header length N, N bytes of JSON header, then the
 * raw little-endian tensor bytes). Each JSON entry is
 *   "name": {"dtype": "F32"|"I32", "shape": [...], "data_offsets": [begin, end]}
 * plus an optional "__metadata__" object of string -> string.
 *
 * Writes are atomic: a temporary file in the same folder, fsync, rename.
 * Loading validates everything (header length against file size, JSON,
 * dtypes, shapes against byte ranges, overlapping or out-of-range offsets)
 * and reports "FILE: problem" through xsa_error; it never crashes on a
 * corrupt or truncated file. Non-goals: dtypes other than F32/I32 (others
 * are reported by name as unsupported), memory mapping.
 */
#ifndef XSA_SAFETENSORS_H
#define XSA_SAFETENSORS_H

#include "tensor.h"

typedef struct xsa_st_file {
    int n;                  /* tensors, in file order */
    char **names;
    xsa_tensor **tensors;   /* owned references, contiguous */
    int n_meta;             /* __metadata__ entries */
    char **meta_keys;
    char **meta_values;
} xsa_st_file;

xsa_st_file *xsa_st_load(const char *path);
/* Only the metadata of path (n = 0, no tensor read): what a loader reads
 * first to choose how to load the rest (validated as xsa_st_load does). */
xsa_st_file *xsa_st_load_meta(const char *path);
/* Borrowed pointer, NULL when absent (no error recorded). */
xsa_tensor *xsa_st_get(const xsa_st_file *f, const char *name);
const char *xsa_st_meta(const xsa_st_file *f, const char *key);
void xsa_st_free(xsa_st_file *f);

/* Saves n tensors (any strides; written contiguous) with metadata. */
int xsa_st_save(const char *path, int n, const char *const *names,
                xsa_tensor *const *tensors, int n_meta,
                const char *const *meta_keys, const char *const *meta_values);

#endif
