/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "json.h"
#include "log.h"

int json_buf_str(struct buf *b, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len = strlen(str);
	int r = buf_puts(b, "\"");

	for (size_t i = 0; i < len && r == 0;) {
		unsigned cp;
		size_t l = log_utf8_decode(s + i, len - i, &cp);

		if (!l) {
			/* Not UTF-8: spelled out, never passed on to break the reader's decoder. */
			r = buf_printf(b, "\\\\x%02x", s[i]);
			i++;
			continue;
		}
		if (cp == '"' || cp == '\\')
			r = buf_printf(b, "\\%c", (char)cp);
		else if (log_cp_unsafe(cp))
			r = buf_printf(b, "\\u%04x", cp);
		else
			r = buf_append(b, s + i, l);
		i += l;
	}
	return r ? -1 : buf_puts(b, "\"");
}

void json_fput_str(FILE *f, const char *s)
{
	struct buf b = {0};

	if (json_buf_str(&b, s) == 0)
		fwrite(b.data, 1, b.len, f);
	else
		fputs("\"\"", f);
	buf_free(&b);
}
