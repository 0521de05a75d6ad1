/*
 * xz.c: whole-file xz decompression through liblzma (see xz.h).
 */
#include <lzma.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fileio.h"
#include "xz.h"

/* The decoder's own memory (the LZMA2 dictionary): xz -9 needs 65 MiB; a
 * stream that asks for more than this was not written for us. */
#define XZ_MEMLIMIT (512u << 20)

int xsa_xz_is_xz(const void *buf, size_t n)
{
    static const unsigned char magic[6] = {0xFD, '7', 'z', 'X', 'Z', 0x00};
    return buf && n >= sizeof magic && memcmp(buf, magic, sizeof magic) == 0;
}

static const char *lzma_message(lzma_ret r)
{
    switch (r) {
    case LZMA_MEM_ERROR: return "out of memory";
    case LZMA_MEMLIMIT_ERROR: return "the stream needs more decoder memory than the 512 MiB allowed";
    case LZMA_FORMAT_ERROR: return "not an xz stream";
    case LZMA_OPTIONS_ERROR: return "unsupported xz options";
    case LZMA_DATA_ERROR: return "corrupt compressed data";
    case LZMA_BUF_ERROR: return "truncated compressed data";
    case LZMA_UNSUPPORTED_CHECK: return "unsupported integrity check type";
    default: return "decoder error";
    }
}

static size_t text_limit = XSA_XZ_DEFAULT_LIMIT;

size_t xsa_xz_limit(void) { return text_limit; }

int xsa_xz_set_limit(size_t max_out)
{
    if (max_out == 0) return xsa_error("xz: the size limit must be at least 1 byte");
    if (max_out > SIZE_MAX / 4) max_out = SIZE_MAX / 4; /* keeps max_out + 2 from wrapping */
    text_limit = max_out;
    return 0;
}

/* The uncompressed size the streams' indexes declare (the whole image is in
 * memory, so the decoder never asks to seek); 0 when they cannot be read,
 * and the decoding below reports why. */
static uint64_t declared_size(const void *in, size_t n)
{
    lzma_stream s = LZMA_STREAM_INIT;
    lzma_index *idx = NULL;
    uint64_t size = 0;
    if (lzma_file_info_decoder(&s, &idx, XZ_MEMLIMIT, n) != LZMA_OK) return 0;
    s.next_in = in;
    s.avail_in = n;
    lzma_ret r = lzma_code(&s, LZMA_FINISH);
    if (r == LZMA_STREAM_END && idx) size = lzma_index_uncompressed_size(idx);
    if (idx) lzma_index_end(idx, NULL);
    lzma_end(&s);
    return size;
}

char *xsa_xz_decode(const void *in, size_t n, size_t max_out, const char *what, size_t *n_out)
{
    if (n_out) *n_out = 0;
    if (!what) what = "xz data";
    /* refused before any output exists when the index says it is too big;
     * an index that lies is caught below (liblzma checks it against the
     * data), and the output never grows past max_out either way */
    uint64_t declared = declared_size(in, n);
    if (max_out && declared > max_out) {
        xsa_error("%s: decompresses to %llu bytes (its index says), more than the limit of %zu bytes "
                  "(raise it with xsa.data.max_text_bytes(n) or XSA_MAX_TEXT_BYTES)",
                  what, (unsigned long long)declared, max_out);
        return NULL;
    }
    lzma_stream s = LZMA_STREAM_INIT;
    /* LZMA_CONCATENATED: `cat a.xz b.xz` is a valid file too, as for xz(1). */
    lzma_ret r = lzma_stream_decoder(&s, XZ_MEMLIMIT, LZMA_CONCATENATED);
    if (r != LZMA_OK) {
        xsa_error("%s: %s", what, lzma_message(r));
        return NULL;
    }
    /* the declared size exactly; else (xz ratios on text are 4-6x) 8x the
     * input, then doubling */
    size_t cap = n < SIZE_MAX / 16 ? n * 8 + 4096 : SIZE_MAX / 2;
    if (declared > 0 && declared < SIZE_MAX / 2) cap = (size_t)declared + 2;
    /* room for max_out + 1 bytes and the NUL: a full buffer is one byte too many */
    if (max_out && cap > max_out + 2) cap = max_out + 2;
    char *out = malloc(cap);
    if (!out) {
        lzma_end(&s);
        xsa_error("%s: out of memory (%zu bytes)", what, cap);
        return NULL;
    }
    s.next_in = in;
    s.avail_in = n;
    s.next_out = (uint8_t *)out;
    s.avail_out = cap - 1; /* room for the NUL */
    for (;;) {
        r = lzma_code(&s, LZMA_FINISH);
        if (r == LZMA_STREAM_END) break;
        /* LZMA_BUF_ERROR with a full output buffer only asks for more room;
         * with room left it means the input ended early. */
        if (r != LZMA_OK && !(r == LZMA_BUF_ERROR && s.avail_out == 0)) {
            xsa_error("%s: %s", what, lzma_message(r));
            goto fail;
        }
        if (s.avail_out == 0) {
            size_t len = cap - 1;
            if (max_out && len > max_out) {
                xsa_error("%s: decompresses to more than the limit of %zu bytes "
                          "(raise it with xsa.data.max_text_bytes(n) or XSA_MAX_TEXT_BYTES)", what, max_out);
                goto fail;
            }
            if (cap > SIZE_MAX / 2) {
                xsa_error("%s: decompressed size overflows", what);
                goto fail;
            }
            size_t ncap = cap * 2;
            if (max_out && ncap > max_out + 2) ncap = max_out + 2;
            char *nb = realloc(out, ncap);
            if (!nb) {
                xsa_error("%s: out of memory (%zu bytes)", what, ncap);
                goto fail;
            }
            out = nb;
            cap = ncap;
            s.next_out = (uint8_t *)out + len;
            s.avail_out = cap - 1 - len;
        }
    }
    size_t len = (size_t)s.total_out;
    lzma_end(&s);
    out[len] = '\0';
    if (n_out) *n_out = len;
    return out;
fail:
    lzma_end(&s);
    free(out);
    return NULL;
}

char *xsa_read_text(const char *path, size_t *n)
{
    size_t rn;
    char *raw = xsa_read_file(path, &rn);
    if (n) *n = 0;
    if (!raw) return NULL;
    if (!xsa_xz_is_xz(raw, rn)) {
        if (n) *n = rn;
        return raw;
    }
    char *text = xsa_xz_decode(raw, rn, text_limit, path, n);
    free(raw);
    return text;
}
