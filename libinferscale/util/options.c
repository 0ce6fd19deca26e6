/* The byte size of each version of each public versioned struct (see
 * options.h). */
#include "util/options.h"

const size_t infs__sizes_embedder_options[] = { [1] = sizeof(infs_embedder_options) };
const size_t infs__sizes_embed_options[] = { [1] = sizeof(infs_embed_options) };
const size_t infs__sizes_fact_input[] = { [1] = sizeof(infs_fact_input) };
const size_t infs__sizes_encode_options[] = { [1] = sizeof(infs_encode_options) };
const size_t infs__sizes_engine_options[] = { [1] = offsetof(infs_engine_options, device),
                                               [2] = sizeof(infs_engine_options) };
const size_t infs__sizes_generate_options[] = { [1] = sizeof(infs_generate_options) };
const size_t infs__sizes_ask_options[] = { [1] = offsetof(infs_ask_options, recompute_ratio),
                                            [2] = offsetof(infs_ask_options, ignore_eos),
                                            [3] = offsetof(infs_ask_options, fact_temperature),
                                            [4] = sizeof(infs_ask_options) };
const size_t infs__sizes_geometry[] = { [1] = sizeof(infs_geometry) };
const size_t infs__sizes_kv_layout[] = { [1] = sizeof(infs_kv_layout) };
const size_t infs__sizes_inject_options[] = { [1] = sizeof(infs_inject_options) };
const size_t infs__sizes_injector_options[] = { [1] = sizeof(infs_injector_options) };
const size_t infs__sizes_model_options[] = { [1] = offsetof(infs_model_options, device),
                                              [2] = offsetof(infs_model_options, int8_activations),
                                              [3] = offsetof(infs_model_options, device_weights),
                                              [4] = sizeof(infs_model_options) };
const size_t infs__sizes_model_info[] = { [1] = sizeof(infs_model_info) };
const size_t infs__sizes_forward_options[] = { [1] = sizeof(infs_forward_options) };
const size_t infs__sizes_device_forward_options[] = { [1] = offsetof(infs_device_forward_options, n_seqs),
                                                       [2] = sizeof(infs_device_forward_options) };
const size_t infs__sizes_retrieve_options[] = { [1] = sizeof(infs_retrieve_options) };
const size_t infs__sizes_searcher_options[] = { [1] = sizeof(infs_searcher_options) };
const size_t infs__sizes_store_options[] = { [1] = offsetof(infs_store_options, host_budget_bytes),
                                              [2] = offsetof(infs_store_options, remote),
                                              [3] = sizeof(infs_store_options) };
const size_t infs__sizes_store_stats[] = { [1] = offsetof(infs_store_stats, lost_records),
                                            [2] = offsetof(infs_store_stats, host_bytes),
                                            [3] = offsetof(infs_store_stats, torn_bytes),
                                            [4] = sizeof(infs_store_stats) };
const size_t infs__sizes_fact[] = { [1] = sizeof(infs_fact) };
