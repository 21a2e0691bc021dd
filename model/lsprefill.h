/* lsprefill.h - the reference model's prefill through R streamed layer
 * buffers (FlashOffloading layer streaming, docs/FLASHOFFLOAD.md §2 "The
 * reference model's prefill"): the CPU reference that a GPU executor follows.
 *
 * The prompt is cut into chunks of `chunk` positions (forward passes). Each
 * layer's payload history lives on the host (the prefill's rows[src], what the
 * session imports); the "device" holds R layer buffers of n rows each, run by
 * the schedule of dhs_ls_schedule (dev/lstream.h): buffer 0 keeps layer
 * 0, layers 1..L-1 rotate over buffers 1..R-1 in (chunk, layer) order.
 *   load(c, l, b)      host rows [0, c*chunk) of layer l's source -> buffer b
 *   compute(c, l, b)   the chunk's positions at layer l: their rows into buffer b
 *                      (and a producer's index keys), then each position's
 *                      selection and attention over buffer b, as a speculative
 *                      block of the decode step does
 *   writeback(c, l, b) buffer b rows of the chunk -> host
 * The executor runs the events in list order and tracks what each buffer holds:
 * a compute whose buffer does not hold its layer's rows [0, c*chunk) is refused
 * (DHS_ERR_STATE), as is a write-back of rows the buffer does not hold.
 *
 * Every position's arithmetic is that of dhs_ref_prefill_run (causality: a row
 * depends only on earlier positions), so the history, the index keys and the
 * logits are byte-identical to it for any chunk and R. Index keys stay whole
 * (132 bytes a row at GLM-5.3, 5x less than the payload of one layer); only
 * payload rows stream. Needs one source per layer, m = 1 (the GPU model's
 * geometries: glm-5.3, deepseek-v3.2). */
#ifndef DHS_REF_LSPREFILL_H
#define DHS_REF_LSPREFILL_H

#include "dev/lstream.h"
#include "model/model.h"

typedef struct dhs_ref_ls_stats {
    int32_t chunks, buffers;
    int64_t events, loads, computes, writebacks;
    int64_t load_rows, writeback_rows;  /* rows moved host -> buffer, buffer -> host (all layers) */
    uint64_t buffer_bytes;              /* the R layer buffers: the streamed prefill's device rows */
    uint64_t resident_bytes;            /* every layer's rows at once: full residency */
    double seconds;
} dhs_ref_ls_stats;

/* Runs the event list ev[0..n_ev-1] of a schedule for C = ceil(n / chunk)
   chunks, R = n_buffers, L = the model's layers. DHS_ERR_INVALID_ARG: bad
   arguments or an event out of range; DHS_ERR_UNSUPPORTED: a source shared by
   layers or with m > 1; DHS_ERR_STATE: an order that reads what a buffer does
   not hold (see above) or a schedule that leaves a chunk uncomputed;
   DHS_ERR_NOMEM. On error *out is freed (zeroed). */
dhs_status dhs_ref_prefill_ls_run(const dhs_ref_model *m, const int32_t *tokens, int64_t n, int64_t chunk,
                                  int32_t n_buffers, const dhs_ls_event *ev, int64_t n_ev, dhs_ref_prefill *out,
                                  dhs_ref_ls_stats *stats);

/* Schedules (dhs_ls_schedule: n_buffers >= 2, onload_layer_map [L] or NULL)
   and runs it. */
dhs_status dhs_ref_prefill_streamed(const dhs_ref_model *m, const int32_t *tokens, int64_t n, int64_t chunk,
                                    int32_t n_buffers, const int32_t *onload_layer_map, dhs_ref_prefill *out,
                                    dhs_ref_ls_stats *stats);

/* The same prefill on the GPU model (model/gpu.h; CUDA builds with a device,
   else DHS_ERR_UNSUPPORTED): the R buffers in device memory, the host history
   pinned, loads on one stream, the model's kernels on its own, write-backs on
   a third, each dependency a cudaEvent (the lstream executor's pattern). A
   compute is what the decode step runs for a speculative block: the chunk's
   positions as query slots, rows into the buffer, a producer's selection over
   the session's device key store, attention with the buffer as the base (the
   selection is the location). The schedule is dhs_ls_schedule's; out holds
   the history (copied from pinned memory), the keys and the logits, to be
   compared with dhs_ref_prefill_run / dhs_ref_prefill_streamed. stats
   ->seconds is the time to the logits (TTFT), buffer_bytes the R buffers, and
   device_bytes (below) every device byte the prefill allocated besides the
   model: buffers and key stores. topk_fused: the model's selection kernel
   (0) or the library's fused top-k (1). */
dhs_status dhs_ref_prefill_streamed_gpu(const dhs_ref_model *m, const int32_t *tokens, int64_t n, int64_t chunk,
                                        int32_t n_buffers, const int32_t *onload_layer_map, int topk_fused,
                                        dhs_ref_prefill *out, dhs_ref_ls_stats *stats, uint64_t *device_bytes);

#endif
