/*
 * text.c: characters and display widths of UTF-8 text (see text.h).
 */
#include <utf8proc.h>

#include "text.h"

size_t xsa_utf8_char(const char *s, size_t n, int32_t *cp)
{
    utf8proc_int32_t c;
    utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &c);
    if (len < 1) {
        *cp = -1;
        return 1;
    }
    *cp = c;
    return (size_t)len;
}

int xsa_char_width(int32_t cp)
{
    if (cp < 0) return 1;
    int w = utf8proc_charwidth(cp);
    return w < 0 ? 0 : (w > 2 ? 2 : w);
}
