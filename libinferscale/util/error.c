#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_msg[1024];
static _Thread_local int last_code;

int infs__error(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_msg, sizeof last_msg, fmt, ap);
	va_end(ap);
	last_code = code;
	return code;
}

int infs__error_wrap(int code, const char *fmt, ...)
{
	char msg[sizeof last_msg];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	size_t used = n < 0 ? 0 : (size_t)n < sizeof msg - 3 ? (size_t)n : sizeof msg - 3;
	memcpy(msg + used, ": ", 2);
	memcpy(msg + used + 2, last_msg, sizeof msg - used - 3);
	msg[sizeof msg - 1] = '\0';
	memcpy(last_msg, msg, sizeof msg);
	last_code = code;
	return code;
}

const char *infs_error_last(void)
{
	return last_msg[0] ? last_msg : "no error";
}

int infs_error_last_code(void)
{
	return last_code;
}

const char *infs_strerror(int code)
{
	switch (code) {
	case INFS_OK: return "success";
	case INFS_EINVAL: return "invalid argument";
	case INFS_ENOMEM: return "out of memory";
	case INFS_EIO: return "input/output error";
	case INFS_ENOTFOUND: return "not found";
	case INFS_EMISMATCH: return "geometry or identity mismatch";
	case INFS_ECORRUPT: return "corrupt file";
	case INFS_EBUSY: return "store is locked by another writer";
	case INFS_ERANGE: return "value out of range";
	case INFS_EUNSUPPORTED: return "not supported";
	case INFS_EDEVICE: return "device error";
	case INFS_EEXISTS: return "already exists";
	case INFS_EFORMAT: return "bad file format";
	case INFS_EBUDGET: return "memory budget exceeded";
	case INFS_ECANCELED: return "canceled";
	case INFS_EREADONLY: return "store is read-only";
	case INFS_ENOTRESIDENT: return "fact KV not resident";
	default: return "unknown status code";
	}
}
