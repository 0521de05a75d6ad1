/*
 * bpe.h: GPT-2 byte-level BPE, token for token identical to tiktoken's
 * "gpt2" encoding.
 *
 *   xsa_bpe *tok = xsa_bpe_load("encoder.json", "vocab.bpe");
 *   size_t n;
 *   int32_t *ids = xsa_bpe_encode(tok, "Hello world", 11, 0, &n); // 15496 995
 *   size_t len;
 *   char *text = xsa_bpe_decode(tok, ids, n, &len);             // "Hello world"
 *   free(text); free(ids); xsa_bpe_free(tok);
 *
 * What encoding does, in order:
 *   1. Invalid UTF-8 is repaired first: each maximal invalid subsequence
 *      becomes U+FFFD (EF BF BD), the "maximal subpart" rule of Unicode
 *      (ch. 3, U+FFFD substitution) that Python's bytes.decode(errors=
 *      "replace") and WHATWG's TextDecoder follow. Valid input is untouched.
 *   2. With XSA_BPE_SPECIAL, the text is cut at each "<|endoftext|>"; the
 *      pieces are encoded independently and the special id (50256) is put
 *      between them. Without it, "<|endoftext|>" is ordinary text (tiktoken's
 *      encode_ordinary).
 *   3. Pre-tokenisation by hand over UTF-8, equivalent to tiktoken's regex
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      with L = Lu Ll Lt Lm Lo and N = Nd Nl No (utf8proc categories) and \s
 *      the Unicode White_Space set (U+0009-000D, 0020, 0085, 00A0, 1680,
 *      2000-200A, 2028, 2029, 202F, 205F, 3000).
 *   4. Each piece: its id if the whole piece is a token, else byte pair
 *      merges by rank (vocab.bpe line order; the lowest-ranked adjacent pair
 *      whose concatenation is a token merges first, leftmost on ties, as
 *      tiktoken does). The merge uses a heap over a linked list, O(n log n) in
 *      the piece length, so a 1 MB "word" takes milliseconds.
 *   Results of pieces up to 128 bytes are kept in a cache inside the
 *   tokenizer, which is why encoding mutates it: one xsa_bpe must not encode
 *   from two threads at once (decode and the other getters are read-only).
 *
 * Non-goals: other encodings (cl100k...), special tokens other than
 * <|endoftext|>, Unicode normalisation (none is applied, as in GPT-2).
 */
#ifndef XSA_BPE_H
#define XSA_BPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct xsa_bpe xsa_bpe;

/* Flags of xsa_bpe_encode. */
#define XSA_BPE_SPECIAL 1   /* "<|endoftext|>" in the text is the special token */

/* Bump when a change to the algorithm could change ids (part of identity). */
#define XSA_BPE_ALGO_VERSION 1

/* A growable list of ids (for callers that append many encodings). */
typedef struct xsa_bpe_ids {
    int32_t *ids;
    size_t n, cap;
} xsa_bpe_ids;

/* Loads encoder.json (token string -> id, GPT-2's byte-to-unicode alphabet)
 * and vocab.bpe (merges in rank order). NULL + xsa_error naming the file and
 * the problem. */
xsa_bpe *xsa_bpe_load(const char *encoder_json_path, const char *vocab_bpe_path);
/* The same from memory (the buffers are not kept). */
xsa_bpe *xsa_bpe_load_buffers(const char *encoder_json, size_t encoder_len,
                              const char *vocab_bpe, size_t vocab_len);
void xsa_bpe_free(xsa_bpe *b);                    /* NULL ok */

int xsa_bpe_vocab_size(const xsa_bpe *b);         /* 50257 for GPT-2 */
int xsa_bpe_eot(const xsa_bpe *b);                /* id of <|endoftext|>, -1 if absent */
/* A hash of both files' bytes and XSA_BPE_ALGO_VERSION: equal identities
 * give equal ids (used to key token caches). */
uint64_t xsa_bpe_identity(const xsa_bpe *b);
/* The bytes of one token (not NUL-terminated), NULL + error if id is out of
 * range. */
const char *xsa_bpe_token(const xsa_bpe *b, int32_t id, size_t *len);

/* Encodes text[0..n) (any bytes), appending to out. 0, or -1 + error (out of
 * memory only; out keeps what was appended). */
int xsa_bpe_encode_append(xsa_bpe *b, const char *text, size_t n, int flags,
                          xsa_bpe_ids *out);
/* Encodes into a malloc'd array (*n_out ids; never NULL on success, even for
 * empty text). */
int32_t *xsa_bpe_encode(xsa_bpe *b, const char *text, size_t n, int flags,
                        size_t *n_out);
/* The exact bytes of the ids, malloc'd and NUL-terminated beyond *len_out.
 * NULL + "decode: id X at position P is out of range [0, V)". */
char *xsa_bpe_decode(const xsa_bpe *b, const int32_t *ids, size_t n, size_t *len_out);

/* Drops the cache of merged pieces (for benchmarks; results never change). */
void xsa_bpe_clear_cache(xsa_bpe *b);

/* The repair of step 1 on its own: a malloc'd copy with each maximal invalid
 * subsequence replaced by EF BF BD, or NULL with *out_len = n when text is
 * already valid UTF-8 (nothing allocated). Sets *failed on out of memory. */
char *xsa_utf8_repair(const char *text, size_t n, size_t *out_len, int *failed);

void xsa_bpe_ids_free(xsa_bpe_ids *v);

/* The 64-bit hash behind identities (same value on every machine); data.c
 * keys token caches with it. */
uint64_t xsa_bpe_hash(const void *p, size_t n, uint64_t seed);

#endif
