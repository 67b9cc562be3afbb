/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libsecret/secret.h>

#include "keyring.h"
#include "testhook.h"

/*
 * The owner's keyring through libsecret (Secret Service: GNOME Keyring, KWallet,
 * KeePassXC). Items of our own schema, one per (scope, name); the scope attribute is "*"
 * for global (no project name can be "*").
 */
static const SecretSchema schema = {
	"org.ocsb.Secret",
	SECRET_SCHEMA_NONE,
	{
		{"scope", SECRET_SCHEMA_ATTRIBUTE_STRING},
		{"name", SECRET_SCHEMA_ATTRIBUTE_STRING},
		/* Injected secrets only: the route (issue 17); exported ones have none. */
		{"inject", SECRET_SCHEMA_ATTRIBUTE_STRING},
		{NULL, 0},
	},
	0,
	NULL,
	NULL,
	NULL,
	NULL,
	NULL,
	NULL,
	NULL,
};

#define GLOBAL_ATTR "*"

static const char *scope_attr(const char *scope)
{
	return scope[0] ? scope : GLOBAL_ATTR;
}

/* GError into one line for the user, with what to do when there is no keyring at all. */
static int keyring_error(GError *e, const char *what, char *err, size_t errlen)
{
	/* No bus (autolaunch fails: G_IO_ERROR or G_SPAWN_ERROR), or a bus without a keyring. */
	int none = e->domain == G_IO_ERROR || e->domain == G_SPAWN_ERROR ||
		(e->domain == G_DBUS_ERROR &&
			(e->code == G_DBUS_ERROR_SERVICE_UNKNOWN ||
				e->code == G_DBUS_ERROR_NAME_HAS_NO_OWNER ||
				e->code == G_DBUS_ERROR_SPAWN_FAILED ||
				e->code == G_DBUS_ERROR_NO_SERVER));

	if (none)
		snprintf(err, errlen,
			"no Secret Service keyring is available (%s). On a desktop, unlock "
			"GNOME Keyring, KWallet or KeePassXC; on a headless or SSH-only machine "
			"opt in to the passphrase-encrypted file store with --file "
			"(~/.config/ocsb/secrets.box)",
			e->message);
	else
		snprintf(err, errlen, "keyring: %s: %s", what, e->message);
	g_error_free(e);
	return none ? -EHOSTDOWN : -EIO;
}

#ifdef OCSB_TEST_BUILD
/* A test hook (a test build only): on with OCSB_TEST_HOOKS=1 and the hook's variable =1. */
static int test_hook(const char *value)
{
	return value && !strcmp(value, "1");
}
#endif

/*
 * Test hook OCSB_TEST_KEYRING_STORE_FAIL: stores into a collection that does not exist, so
 * the keyring itself refuses the store (t-86).
 */
static const char *store_collection(void)
{
#ifdef OCSB_TEST_BUILD
	if (test_hook(TESTHOOK_ENV("OCSB_TEST_KEYRING_STORE_FAIL")))
		return "/org/freedesktop/secrets/collection/ocsb_test_none";
#endif
	return SECRET_COLLECTION_DEFAULT;
}

/*
 * The items of (scope, name) other than the one just stored: an item with other
 * attributes (exported before, injected now) is not replaced by the store but sits beside
 * it. Removed only after the new value is stored, so a failed store loses nothing.
 */
static int drop_others(const char *scope, const char *name, const char *route, char *err,
	size_t errlen)
{
	SecretService *svc;
	GHashTable *match;
	GError *e = NULL;
	GList *items;
	int r = 0;

	svc = secret_service_get_sync(SECRET_SERVICE_NONE, NULL, &e);
	if (!svc)
		return keyring_error(e, "replacing", err, errlen);
	match = g_hash_table_new(g_str_hash, g_str_equal);
	g_hash_table_insert(match, (gpointer) "scope", (gpointer)scope_attr(scope));
	g_hash_table_insert(match, (gpointer) "name", (gpointer)name);
	items = secret_service_search_sync(svc, &schema, match, SECRET_SEARCH_ALL, NULL, &e);
	g_hash_table_unref(match);
	if (e)
		r = keyring_error(e, "replacing", err, errlen);
	for (GList *l = items; l && r == 0; l = l->next) {
		GHashTable *attrs = secret_item_get_attributes(l->data);
		const char *have = attrs ? g_hash_table_lookup(attrs, "inject") : NULL;
		int same = route && route[0] ? have && !strcmp(have, route) : !have;

		if (attrs)
			g_hash_table_unref(attrs);
		if (same)
			continue;
#ifdef OCSB_TEST_BUILD
		/* Test hook OCSB_TEST_KEYRING_DROP_FAIL: the removal fails, both items stay (t-85). */
		if (test_hook(TESTHOOK_ENV("OCSB_TEST_KEYRING_DROP_FAIL"))) {
			snprintf(err, errlen, "removal refused (test hook)");
			r = -EIO;
			continue;
		}
#endif
		if (!secret_item_delete_sync(l->data, NULL, &e))
			r = keyring_error(e, "removing", err, errlen);
	}
	g_list_free_full(items, g_object_unref);
	g_object_unref(svc);
	return r;
}

int keyring_put(const char *scope, const char *name, const char *value, const char *route,
	char *err, size_t errlen)
{
	GError *e = NULL;
	char label[200], why[512];
	gboolean ok;
	int r;

	snprintf(label, sizeof(label), "ocsb secret %s (%s)", name, scope[0] ? scope : "global");
	if (route && route[0])
		ok = secret_password_store_sync(&schema, store_collection(), label, value, NULL, &e,
			"scope", scope_attr(scope), "name", name, "inject", route, NULL);
	else
		ok = secret_password_store_sync(&schema, store_collection(), label, value, NULL, &e,
			"scope", scope_attr(scope), "name", name, NULL);
	if (!ok)
		return keyring_error(e, "storing", err, errlen);
	r = drop_others(scope, name, route, why, sizeof(why));
	/* Both items stay: said, and keyring_load refuses the pair until the owner clears it. */
	if (r < 0)
		snprintf(err, errlen,
			"stored %s (%s); the old item of %s could not be removed: %s; run 'ocsb "
			"secrets %s%s rm %s', then set it again",
			name, scope[0] ? scope : "global", name, why,
			scope[0] ? "--project " : "--global", scope, name);
	return r;
}

int keyring_del(const char *scope, const char *name, char *err, size_t errlen)
{
	GError *e = NULL;
	gboolean gone;

	gone = secret_password_clear_sync(
		&schema, NULL, &e, "scope", scope_attr(scope), "name", name, NULL);
	if (e)
		return keyring_error(e, "removing", err, errlen);
	return gone ? 0 : -ENOENT;
}

/*
 * One connection, one session and one search for the whole set: SearchItems, then the
 * items' properties in parallel and every value in a single GetSecrets call, all inside
 * secret_service_search_sync. The values then come from the items' cache, not from one
 * more D-Bus round trip per item (secret_retrievable_retrieve_secret_sync would ask again).
 * The session is the one libsecret negotiates (DH + AES; "plain" only when the service
 * offers nothing else): shortcuts here must not weaken it.
 */
int keyring_load(struct secret_set *s, int with_values, char *err, size_t errlen)
{
	SecretSearchFlags flags = SECRET_SEARCH_ALL | SECRET_SEARCH_UNLOCK;
	SecretService *svc;
	GHashTable *match = NULL;
	GError *e = NULL;
	GList *items = NULL;
	int r = 0;

	if (with_values)
		flags |= SECRET_SEARCH_LOAD_SECRETS;
	svc = secret_service_get_sync(
		with_values ? SECRET_SERVICE_OPEN_SESSION : SECRET_SERVICE_NONE, NULL, &e);
	if (!svc)
		return keyring_error(e, "connecting", err, errlen);
	/* Empty: every item of the schema (the schema name is matched by libsecret). */
	match = g_hash_table_new(g_str_hash, g_str_equal);
	items = secret_service_search_sync(svc, &schema, match, flags, NULL, &e);
	g_hash_table_unref(match);
	if (e) {
		r = keyring_error(e, "listing", err, errlen);
		goto out;
	}
	for (GList *l = items; l && r == 0; l = l->next) {
		SecretItem *it = l->data;
		GHashTable *attrs = secret_item_get_attributes(it);
		const char *scope = attrs ? g_hash_table_lookup(attrs, "scope") : NULL;
		const char *name = attrs ? g_hash_table_lookup(attrs, "name") : NULL;
		const char *route = attrs ? g_hash_table_lookup(attrs, "inject") : NULL;
		SecretValue *v = NULL;
		const gchar *data = NULL;
		gsize len = 0;

		if (!scope || !name) {
			if (attrs)
				g_hash_table_unref(attrs);
			continue;
		}
		if (!strcmp(scope, GLOBAL_ATTR))
			scope = "";
		if (with_values) {
			/* Loaded by the search; NULL only for an item still locked. */
			v = secret_item_get_secret(it);
			if (!v) {
				snprintf(err, errlen,
					"keyring: %s is locked (unlock the keyring and push again)",
					name);
				r = -EIO;
			} else {
				data = secret_value_get(v, &len);
			}
		}
		/* Items someone else wrote with our schema but invalid: skipped. */
		if (r == 0) {
			r = secrets_set_add_item(s, scope, name, data, len, route, err, errlen);
			if (r == -ENOMEM)
				snprintf(err, errlen, "%s", secrets_alloc_error());
			else if (r != -EEXIST)
				r = 0;
		}
		if (v)
			secret_value_unref(v);
		g_hash_table_unref(attrs);
	}
out:
	g_list_free_full(items, g_object_unref);
	g_object_unref(svc);
	return r;
}
