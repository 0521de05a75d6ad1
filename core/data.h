/*
 * data.h: TinyStories-style text as GPT-2 token ids, a token cache on disk,
 * fixed windows, a train/val split and seeded shuffled batches.
 *
 *   size_t n;
 *   xsa_data_cache_status st;
 *   int32_t *ids = xsa_data_story_tokens(tok, "tinystories.txt",
 *                                        "data/tinystories.txt.tokens.cache", &n, &st);
 *   int64_t nw, ntrain;
 *   xsa_data_split(n < 500000 ? n : 500000, 64, 0.1, &nw, &ntrain);
 *   ... wrap ids in an int32 tensor `tokens` ...
 *   xsa_data_loader *train = xsa_data_loader_new(tokens, 0, ntrain, 64, 16, 1, 0);
 *   xsa_tensor *x, *y;
 *   xsa_data_loader_next(train, &x, &y);      // [16,64] int32 each, y = x shifted by one
 *
 * Stories: the text is cut at lines that hold exactly "<|endoftext|>" (a
 * trailing '\r' is allowed); each story is the text between two such lines
 * with leading and trailing white space (space, \t, \r, \n) removed; empty
 * stories are skipped. Each story is encoded on its own (no special tokens:
 * "<|endoftext|>" inside a line is plain text) and followed by the end-of-text
 * id (50256): s0 EOT s1 EOT ... s_last EOT, the layout of the file itself.
 *
 * Windows: window w covers tokens [w*(T+1), (w+1)*(T+1)); its first T tokens
 * are the inputs and its last T the targets (shifted by one). Windows never
 * overlap; leftover tokens at the end are unused.
 *
 * Token cache file (little-endian), rebuilt whenever anything does not match:
 *   0  char[8] "XSATOKS\0"      8  u32 format version   12 u32 header size (64)
 *   16 u64 source size          24 u64 source hash (xsa_bpe_hash of the bytes)
 *   32 u64 tokenizer identity   40 u64 number of ids
 *   48 u64 hash of the id bytes 56 i64 source mtime (informational)
 *   64 uint16 ids
 * Written atomically (fileio.h). Non-goals: vocabularies above 65536 ids
 * in the cache (refused), memory mapping, more than one source per cache.
 */
#ifndef XSA_DATA_H
#define XSA_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"
#include "tensor.h"

#define XSA_DATA_CACHE_VERSION 1

/* Story ids of text[0..n) as described above (malloc'd; *n_out ids). */
int32_t *xsa_data_tokenize_stories(xsa_bpe *tok, const char *text, size_t n, size_t *n_out);

typedef struct xsa_data_cache_status {
    int from_cache;        /* 1: ids came from the cache file */
    char reason[160];      /* why the cache was (re)built, "" if it was used */
    int written;           /* 1: a new cache file was written */
    char write_error[512]; /* why writing failed (ids are still returned) */
} xsa_data_cache_status;

/* The story ids of the file at source_path, from cache_path when it is valid
 * for this source and tokenizer, else tokenised and written there
 * (cache_path NULL: never cached). NULL + xsa_error only when the source
 * cannot be read or tokenised; a cache that cannot be written is reported in
 * st->write_error. */
int32_t *xsa_data_story_tokens(xsa_bpe *tok, const char *source_path, const char *cache_path,
                               size_t *n_out, xsa_data_cache_status *st);

/* The ids in the bytes f[0..len) of a cache file (malloc'd, *n_out ids) if
 * the image is valid for this source (size and xsa_bpe_hash(bytes, 0x7372)),
 * tokenizer identity and vocabulary size; else NULL with the reason in why
 * (no xsa_error: a stale cache is ordinary). What xsa_data_story_tokens
 * applies to the cache file; public for tests and fuzzing. */
int32_t *xsa_data_cache_parse(const uint8_t *f, size_t len, uint64_t src_size, uint64_t src_hash,
                              uint64_t ident, int vocab, size_t *n_out, char *why, size_t why_n);

/* Windows of seq_len+1 tokens in the first n_tokens, and how many of them
 * (the first) are for training: n_train = floor(n_windows * (1 -
 * val_fraction)), the rest (the last) for validation. -1 + error on bad
 * arguments. */
int xsa_data_split(int64_t n_tokens, int64_t seq_len, double val_fraction,
                   int64_t *n_windows, int64_t *n_train);

/*
 * A loader over windows [first_window, first_window + n_windows) of a 1-D
 * int32 token tensor (retained). shuffle = 1 (training): each epoch visits
 * the windows in a seeded random order and drops the last incomplete batch
 * (num_batches = n_windows / batch); the order of epoch e comes from
 * xsa_rng seeded with seed ^ ((e + 1) * 0x9E3779B97F4A7C15), so the same seed
 * gives the same batches on every machine. shuffle = 0 (validation): windows
 * in order, the last batch holding the remainder (num_batches =
 * ceil(n_windows / batch)).
 */
typedef struct xsa_data_loader xsa_data_loader;

xsa_data_loader *xsa_data_loader_new(xsa_tensor *tokens, int64_t first_window, int64_t n_windows,
                                     int64_t seq_len, int64_t batch, int shuffle, uint64_t seed);
void xsa_data_loader_free(xsa_data_loader *l);      /* NULL ok */
int64_t xsa_data_loader_num_batches(const xsa_data_loader *l);
/* Batch i (0-based) of the current epoch: new int32 tensors [B,T] (B may be
 * smaller for the last validation batch). */
int xsa_data_loader_batch(xsa_data_loader *l, int64_t i, xsa_tensor **inputs, xsa_tensor **targets);
/* The next batch, starting a new (reshuffled) epoch after the last one. */
int xsa_data_loader_next(xsa_data_loader *l, xsa_tensor **inputs, xsa_tensor **targets);
/* Back to the first batch of epoch 0. */
void xsa_data_loader_reset(xsa_data_loader *l);
int64_t xsa_data_loader_epoch(const xsa_data_loader *l);    /* 0-based */
int64_t xsa_data_loader_position(const xsa_data_loader *l); /* batches taken this epoch */
/* The last epoch (0-based) a loader reaches: 2^62, so that epoch + 1 (the
 * 1-based epoch a binding shows) and the seed arithmetic of the shuffle
 * never overflow an int64; next() past its end is an error. */
#define XSA_DATA_MAX_EPOCH ((int64_t)1 << 62)
/* Puts the loader where it was after taking `position` batches of epoch
 * `epoch` (0-based; 0 <= epoch <= XSA_DATA_MAX_EPOCH, 0 <= position <=
 * num_batches), as epoch() and
 * position() reported them: the next call to next() returns what it would
 * have returned then (a resumed run sees the same batches). -1 + error on
 * values out of range. */
int xsa_data_loader_seek(xsa_data_loader *l, int64_t epoch, int64_t position);
/* The window index (into the whole token tensor) at position k of the
 * current epoch's order (for tests and reports). -1 if out of range. */
int64_t xsa_data_loader_window(const xsa_data_loader *l, int64_t k);

#endif
