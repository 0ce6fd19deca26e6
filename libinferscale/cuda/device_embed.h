/* The embedder's encoder on a device (device_embed.c): the backend's
 * bert_* entries (backend/backend.h). */
#ifndef INFS_DEVICE_EMBED_H
#define INFS_DEVICE_EMBED_H

#include <stdint.h>

struct infs__bert_config;
struct infs__bert_weights;
struct infs__bert_dev;

int infs__device_bert_upload(struct infs__bert_dev **out, int device, const struct infs__bert_config *cfg,
                             const struct infs__bert_weights *w, uint32_t max_tokens);
void infs__device_bert_release(struct infs__bert_dev *d);
int infs__device_bert_encode(struct infs__bert_dev *d, const int32_t *ids, const uint32_t *offsets, uint32_t n_seq,
                             int pooling, int normalize, float *out, void *stream);
int infs__device_bert_encode_host(struct infs__bert_dev *d, const int32_t *ids, const uint32_t *offsets,
                                  uint32_t n_seq, int pooling, int normalize, float *out);
uint64_t infs__device_bert_graph_runs(const struct infs__bert_dev *d);

#endif
