/* error.c: the thread-local message behind xsa_error()/xsa_last_error(). */
#include <stdarg.h>
#include <stdio.h>

#include "error.h"

static _Thread_local char message[1024];

int xsa_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return -1;
}

const char *xsa_last_error(void) { return message; }

void xsa_clear_error(void) { message[0] = '\0'; }
