/*
 * error.h: how the core reports failure.
 *
 * Every core function that can fail on bad input returns a failure value
 * (NULL, or a negative int) and records a readable message with
 * xsa_error(). The caller fetches it with xsa_last_error(). The core never
 * prints, exits or aborts on bad input; assert() guards internal invariants
 * only. The message buffer is thread-local.
 *
 * Messages name the function and the offending values, e.g.
 *   "matmul: shapes [2,3] and [4,5] do not align"
 */
#ifndef XSA_ERROR_H
#define XSA_ERROR_H

#if defined(__GNUC__)
#define XSA_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define XSA_PRINTF(f, a)
#endif

/* Records a message (printf-style) and returns -1, so `return xsa_error(...)`
 * works in int-returning functions. */
int xsa_error(const char *fmt, ...) XSA_PRINTF(1, 2);

/* The last recorded message ("" when none). */
const char *xsa_last_error(void);

/* Forgets the last message. */
void xsa_clear_error(void);

#endif
