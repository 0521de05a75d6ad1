/*
 * text.h: UTF-8 text as a terminal shows it: characters and their display
 * widths, for wrapping and aligning columns (lua/xsa/text.lua).
 *
 * A "character" is one valid UTF-8 sequence (a code point) or one byte that
 * is not part of a valid sequence (an invalid byte: generated text can hold
 * half a character, and a terminal shows such a byte as one replacement
 * character). Widths are utf8proc's (Unicode East Asian Width: 2 for wide
 * and fullwidth characters, 0 for combining marks, format and control
 * characters, else 1); an invalid byte is 1.
 *
 *   int32_t cp; size_t len = xsa_utf8_char("λx", 3, &cp);   // 2, cp = 0x3BB
 *   xsa_char_width(0x4E2D) == 2;  xsa_char_width(0x0301) == 0
 *
 * Non-goals: grapheme clusters beyond "a zero-width character stays with the
 * one before it" (text.lua), emoji sequences, bidirectional text.
 */
#ifndef XSA_TEXT_H
#define XSA_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* The length in bytes (1 to 4) of the character at s (n >= 1 bytes left),
 * its code point in *cp, or -1 in *cp for an invalid byte (length 1). */
size_t xsa_utf8_char(const char *s, size_t n, int32_t *cp);
/* The display width of code point cp (0, 1 or 2); 1 for cp < 0 (an invalid
 * byte). */
int xsa_char_width(int32_t cp);

#endif
