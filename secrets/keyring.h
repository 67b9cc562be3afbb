/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SECRETS_KEYRING_H
#define OCSB_SECRETS_KEYRING_H

#include "secrets.h"

/*
 * The Secret Service store. Errors: -EHOSTDOWN when no keyring service is reachable (err
 * explains the --file alternative), -EIO for others; keyring_del: -ENOENT when absent.
 */
/* route: "" or NULL exported, else the injection route (secrets.h, struct secret). */
int keyring_put(const char *scope, const char *name, const char *value, const char *route,
	char *err, size_t errlen);
int keyring_del(const char *scope, const char *name, char *err, size_t errlen);
/* Every item of ours into s (values too when with_values). */
int keyring_load(struct secret_set *s, int with_values, char *err, size_t errlen);

#endif
