/*
 * check.h: the tiny harness of the C tests. CHECK counts a pass or prints the
 * failure with file:line; check_done prints "NAME: N passed, M failed" (the
 * line tests/run.sh adds up) and gives the exit status.
 */
#ifndef XSA_CHECK_H
#define XSA_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            check_passed++;                                                \
        } else {                                                           \
            check_failed++;                                                \
            fprintf(stdout, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stdout, __VA_ARGS__);                                  \
            fputc('\n', stdout);                                           \
        }                                                                  \
    } while (0)

/* |a - b| <= tol * max(1, |b|) */
#define CHECK_NEAR(a, b, tol, what)                                        \
    do {                                                                   \
        double ca_ = (a), cb_ = (b);                                       \
        CHECK(fabs(ca_ - cb_) <= (tol) * fmax(1.0, fabs(cb_)),             \
              "%s: %.9g vs %.9g (tol %g)", (what), ca_, cb_, (double)(tol)); \
    } while (0)

static int check_done(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
