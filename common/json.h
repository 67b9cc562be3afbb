/* SPDX-License-Identifier: MIT */
#ifndef OCSB_JSON_H
#define OCSB_JSON_H

#include <stdio.h>

#include "util.h"

/*
 * The one JSON string writer (`--json` of sync, doctor and mirror status). The output is
 * always valid UTF-8 JSON whatever the input: '"' and '\' are escaped, every code point a
 * terminal acts on (C0, DEL, C1, bidi and zero-width, as log_cp_unsafe says) becomes \uXXXX,
 * and a byte that is not valid UTF-8 becomes the four characters \xNN (as JSON "\\xNN"):
 * names come from the agent's side and must not break the consumer's parser.
 */
/* Append s, quoted, to b. 0, or -1 when out of memory. */
int json_buf_str(struct buf *b, const char *s);
/* Write s, quoted, to f. */
void json_fput_str(FILE *f, const char *s);

#endif
