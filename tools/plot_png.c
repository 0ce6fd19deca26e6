/* PNG: signature, IHDR, one IDAT (zlib), IEND; each chunk with its CRC. */
#include "plot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static int chunk(FILE *f, const char *type, const uint8_t *data, uint32_t n)
{
	uint8_t head[8], tail[4];
	be32(head, n);
	memcpy(head + 4, type, 4);
	uLong crc = crc32(crc32(0, NULL, 0), head + 4, 4);
	if (n) /* zlib's crc32 of a NULL buffer is its initial value, not crc */
		crc = crc32(crc, data, n);
	be32(tail, (uint32_t)crc);
	return fwrite(head, 1, 8, f) == 8 && (!n || fwrite(data, 1, n, f) == n) && fwrite(tail, 1, 4, f) == 4 ? 0 : -1;
}

int plot_write_png(const plot_image *im, const char *path)
{
	static const uint8_t signature[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	if (!im->rgb) {
		errno = EINVAL;
		return -1;
	}
	/* Each scanline: filter type 0 (none), then its pixels. */
	size_t row = (size_t)im->w * 3, raw_n = (size_t)im->h * (row + 1);
	uLongf z_n = compressBound((uLong)raw_n);
	uint8_t *raw = malloc(raw_n), *z = malloc(z_n);
	int rc = -1;
	if (!raw || !z) {
		errno = ENOMEM;
		goto out;
	}
	for (int y = 0; y < im->h; y++) {
		raw[(size_t)y * (row + 1)] = 0;
		memcpy(raw + (size_t)y * (row + 1) + 1, im->rgb + (size_t)y * row, row);
	}
	if (compress2(z, &z_n, raw, (uLong)raw_n, 9) != Z_OK) {
		errno = ENOMEM;
		goto out;
	}
	uint8_t ihdr[13] = { 0 };
	be32(ihdr, (uint32_t)im->w);
	be32(ihdr + 4, (uint32_t)im->h);
	ihdr[8] = 8; /* bits per sample */
	ihdr[9] = 2; /* RGB; compression, filter and interlace methods 0 */
	FILE *f = fopen(path, "wb");
	if (!f)
		goto out;
	rc = fwrite(signature, 1, 8, f) == 8 && !chunk(f, "IHDR", ihdr, 13) && !chunk(f, "IDAT", z, (uint32_t)z_n)
	     && !chunk(f, "IEND", NULL, 0) ? 0 : -1;
	int saved = errno;
	if (fclose(f) && !rc) {
		rc = -1;
		saved = errno;
	}
	errno = saved;
out:
	free(raw);
	free(z);
	return rc;
}
