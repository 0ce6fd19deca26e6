/* The remote tier's key names: one hash tag per namespace, and a spelling
 * of the namespace that no other name shares. */
#include <stdio.h>
#include <string.h>

#include "remote/remote_impl.h"

static bool plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
	       c == '-';
}

bool infs__remote_prefix_ok(const char *prefix)
{
	size_t n = strlen(prefix);
	if (n == 0 || n > INFS__REMOTE_PREFIX_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!plain((unsigned char)prefix[i]))
			return false;
	return true;
}

/* "{prefix:" + the namespace, each byte outside plain() as %XX, + "}". */
static size_t tag(char *buf, const char *prefix, const char *ns)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = (size_t)snprintf(buf, INFS__REMOTE_KEY_MAX, "{%s:", prefix);
	for (const unsigned char *p = (const unsigned char *)ns; *p; p++) {
		if (plain(*p)) {
			buf[n++] = (char)*p;
		} else {
			buf[n++] = '%';
			buf[n++] = hex[*p >> 4];
			buf[n++] = hex[*p & 15];
		}
	}
	buf[n++] = '}';
	buf[n] = '\0';
	return n;
}

size_t infs__remote_key_meta(char *buf, const char *prefix)
{
	return (size_t)snprintf(buf, INFS__REMOTE_KEY_MAX, "{%s}:meta", prefix);
}

size_t infs__remote_key_next_id(char *buf, const char *prefix)
{
	return (size_t)snprintf(buf, INFS__REMOTE_KEY_MAX, "{%s}:next_id", prefix);
}

size_t infs__remote_key_ids(char *buf, const char *prefix, const char *ns)
{
	size_t n = tag(buf, prefix, ns);
	return n + (size_t)snprintf(buf + n, INFS__REMOTE_KEY_MAX - n, ":ids");
}

size_t infs__remote_key_fact(char *buf, const char *prefix, const char *ns, uint64_t id)
{
	size_t n = tag(buf, prefix, ns);
	return n + (size_t)snprintf(buf + n, INFS__REMOTE_KEY_MAX - n, ":f:%llu", (unsigned long long)id);
}
