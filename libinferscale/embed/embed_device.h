/* The embedder on a CUDA device, for the engine: embeddings computed into
 * device memory on the caller's stream, so that a question's vector can
 * stay on the device for retrieval. C that includes no CUDA header calls
 * these; in a build without CUDA no embedder is on a device, and they
 * return INFS_EINVAL.
 *
 * Threads: one embedder has one device workspace, so its device calls
 * (these and infs_embed) run one at a time: a mutex inside the embedder
 * serialises their host side, and on the device each call's work waits
 * (an event, cudaStreamWaitEvent) for the previous call's, whatever
 * streams they were queued on. Callers need no lock of their own. */
#ifndef INFS_EMBED_DEVICE_H
#define INFS_EMBED_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "inferscale/embedder.h"

/* The CUDA device e was loaded on, -1 for the host (and for NULL). */
int infs__embedder_device(const infs_embedder *e);

/* The most tokens ([CLS] and [SEP] included) one device call takes: 64 *
 * max_seq_length, the workspace made at load; 0 for a host embedder. */
uint32_t infs__embedder_device_tokens(const infs_embedder *e);

/* How many of e's device forward passes were replayed from a CUDA graph
 * (a shape's second call captures it, later calls replay it); 0 for a
 * host embedder. */
uint64_t infs__embedder_device_graph_runs(const infs_embedder *e);

/* Embeds n_seq tokenized texts into out, device memory of e's device of
 * n_seq * infs_embedder_dim(e) floats (text s at out + s * dim), exactly
 * as infs_embed pools and normalises them. ids and offsets are host
 * memory: text s is ids[offsets[s] .. offsets[s + 1]), offsets[0] = 0,
 * 1..max_seq_length ids each (infs__embedder_tokenize's, [CLS] and [SEP]
 * included), every id below the model's vocabulary. stream is a
 * cudaStream_t of e's device (NULL: the legacy default stream).
 *
 * The work is queued on stream and the call returns without waiting for
 * the device and allocates nothing: out is ready when stream reaches it.
 * ids and offsets may be reused once the call returns (they travel as
 * kernel arguments). Every argument is checked first: INFS_EINVAL (NULL
 * pointers, e not on a device, out not memory of its device, an empty
 * text, offsets[0] != 0, an id out of range), INFS_ERANGE (a text above
 * max_seq_length, or above infs__embedder_device_tokens tokens in all:
 * nothing is queued); INFS_EDEVICE or INFS_EBUDGET when queueing fails.
 * n_seq 0 queues nothing. Not for stream capture: each call waits on the
 * previous call's event. */
int infs__embed_device_tokens(float *out, const infs_embedder *e, const int32_t *ids, const uint32_t *offsets,
                              uint32_t n_seq, void *stream);

/* The same for n_texts texts, tokenized here with prompt (NULL or "" for
 * none) as infs_embed tokenizes them; the tokenizer's buffers are host
 * memory, the token ids go into host buffers made at load. INFS_ERANGE
 * when the texts' tokens exceed infs__embedder_device_tokens (a single
 * text never does: it is truncated to max_seq_length), INFS_EUNSUPPORTED
 * for a prompt the model cannot take, as infs_embed. */
int infs__embed_device(float *out, const infs_embedder *e, const char *const *texts, size_t n_texts,
                       const char *prompt, void *stream);

#endif
