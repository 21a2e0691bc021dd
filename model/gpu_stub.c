/* gpu_stub.c - the GPU model's entry points (model/gpu.h) in a build without
 * CUDA: nothing is available, everything answers DHS_ERR_UNSUPPORTED. */
#include "model/gpu.h"

#ifndef DHS_HAVE_CUDA
int dhs_ref_gpu_available(void) { return 0; }
dhs_status dhs_ref_gpu_create(const dhs_ref_gpu_desc *d, void *stream, dhs_ref_gpu **out)
{
    (void)d;
    (void)stream;
    if (out) *out = 0;
    return DHS_ERR_UNSUPPORTED;
}
void dhs_ref_gpu_destroy(dhs_ref_gpu *g) { (void)g; }
dhs_status dhs_ref_gpu_weights_alloc(dhs_ref_gpu *g, uint64_t bytes)
{
    (void)g, (void)bytes;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_weights(dhs_ref_gpu *g, uint64_t bytes)
{
    (void)g, (void)bytes;
    return DHS_ERR_UNSUPPORTED;
}
const char *dhs_ref_gpu_error(const dhs_ref_gpu *g)
{
    (void)g;
    return "built without CUDA";
}
dhs_status dhs_ref_gpu_alloc(dhs_ref_gpu *g, uint64_t bytes, void **dev)
{
    (void)g;
    (void)bytes;
    *dev = 0;
    return DHS_ERR_UNSUPPORTED;
}
void dhs_ref_gpu_free(dhs_ref_gpu *g, void *dev)
{
    (void)g;
    (void)dev;
}
dhs_status dhs_ref_gpu_upload(dhs_ref_gpu *g, void *dev, const void *host, uint64_t bytes)
{
    (void)g, (void)dev, (void)host, (void)bytes;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_host_alloc(dhs_ref_gpu *g, uint64_t bytes, void **host)
{
    (void)g, (void)bytes;
    *host = 0;
    return DHS_ERR_UNSUPPORTED;
}
void dhs_ref_gpu_host_free(dhs_ref_gpu *g, void *host) { (void)g, (void)host; }
dhs_status dhs_ref_gpu_queues(dhs_ref_gpu *g, int64_t n_events)
{
    (void)g, (void)n_events;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_queue_copy(dhs_ref_gpu *g, int32_t queue, void *dst, const void *src, uint64_t bytes)
{
    (void)g, (void)queue, (void)dst, (void)src, (void)bytes;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_queue_record(dhs_ref_gpu *g, int32_t queue, int64_t ev)
{
    (void)g, (void)queue, (void)ev;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_queue_wait(dhs_ref_gpu *g, int32_t queue, int64_t ev)
{
    (void)g, (void)queue, (void)ev;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_queues_sync(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_memset(dhs_ref_gpu *g, void *dev, int value, uint64_t bytes)
{
    (void)g, (void)dev, (void)value, (void)bytes;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_begin(dhs_ref_gpu *g, int32_t nq, const int32_t *tokens, const int64_t *pos)
{
    (void)g, (void)nq, (void)tokens, (void)pos;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_rows(dhs_ref_gpu *g, int32_t l, void *const *rowdst, void *const *kcodes, void *const *kscales,
                            uint8_t *rows_host)
{
    (void)g, (void)l, (void)rowdst, (void)kcodes, (void)kscales, (void)rows_host;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_select(dhs_ref_gpu *g, int32_t l, void *const *kcodes, void *const *kscales, int32_t *sel_host)
{
    (void)g, (void)l, (void)kcodes, (void)kscales, (void)sel_host;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_attend(dhs_ref_gpu *g, int32_t l, const void *const *base, const int32_t *loc_host)
{
    (void)g, (void)l, (void)base, (void)loc_host;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_logits(dhs_ref_gpu *g, float *logits_host)
{
    (void)g, (void)logits_host;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_inputs(dhs_ref_gpu *g, dhs_ref_gpu_step_in *in)
{
    (void)g, (void)in;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_upload(dhs_ref_gpu *g, int32_t nq)
{
    (void)g, (void)nq;
    return DHS_ERR_UNSUPPORTED;
}
void dhs_ref_gpu_upload_times(const dhs_ref_gpu *g, double *copy_s, double *event_s)
{
    (void)g;
    *copy_s = *event_s = 0.0;
}
dhs_status dhs_ref_gpu_probe_copy(dhs_ref_gpu *g, void *dst0, void *dst1, const void *src, uint64_t bytes)
{
    (void)g, (void)dst0, (void)dst1, (void)src, (void)bytes;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_probe_flip(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_ERR_UNSUPPORTED;
}
int32_t dhs_ref_gpu_step_stride(const dhs_ref_gpu *g)
{
    (void)g;
    return 0;
}
void dhs_ref_gpu_step_counts(const dhs_ref_gpu *g, uint64_t *inputs_waits, int *inputs_in_step)
{
    (void)g;
    *inputs_waits = 0;
    *inputs_in_step = 0;
}
int32_t *dhs_ref_gpu_step_rloc_device(dhs_ref_gpu *g)
{
    (void)g;
    return 0;
}
dhs_status dhs_ref_gpu_step_compact(dhs_ref_gpu *g, const int32_t *layer_src, int32_t n_src, int rows_at_pos)
{
    (void)g, (void)layer_src, (void)n_src, (void)rows_at_pos;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_tables(dhs_ref_gpu *g, int32_t q0, int32_t n)
{
    (void)g, (void)q0, (void)n;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_embed(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_rows(dhs_ref_gpu *g, int32_t l)
{
    (void)g, (void)l;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_select(dhs_ref_gpu *g, int32_t l)
{
    (void)g, (void)l;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_select_pages(dhs_ref_gpu *g, int32_t l, const dhs_topk_pages *pg)
{
    (void)g, (void)l, (void)pg;
    return DHS_ERR_UNSUPPORTED;
}
int32_t *dhs_ref_gpu_step_sel(dhs_ref_gpu *g)
{
    (void)g;
    return 0;
}
dhs_status dhs_ref_gpu_step_attend(dhs_ref_gpu *g, int32_t l, const int32_t *loc_dev)
{
    (void)g, (void)l, (void)loc_dev;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_logits(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_step_wait(dhs_ref_gpu *g, const float **logits)
{
    (void)g;
    if (logits) *logits = 0;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_capture_begin(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_capture_end(dhs_ref_gpu *g, int keep)
{
    (void)g, (void)keep;
    return DHS_ERR_UNSUPPORTED;
}
int32_t dhs_ref_gpu_graph_queries(const dhs_ref_gpu *g)
{
    (void)g;
    return 0;
}
dhs_status dhs_ref_gpu_graph_launch(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_prof_enable(dhs_ref_gpu *g, int32_t max_marks)
{
    (void)g, (void)max_marks;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_prof_begin(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_ERR_UNSUPPORTED;
}
void dhs_ref_gpu_prof_mark(dhs_ref_gpu *g, int32_t phase) { (void)g, (void)phase; }
double dhs_ref_gpu_hbm_gbps(uint64_t bytes)
{
    (void)bytes;
    return 0;
}

int32_t dhs_ref_gpu_attn_chunks(int32_t k) { return (k + DHS_REF_ATT_CHUNK - 1) / DHS_REF_ATT_CHUNK; }
dhs_status dhs_ref_gpu_select_kernel(void *stream, int32_t which, int32_t nq, int32_t idx_heads, int32_t idx_dim,
                                     int32_t k, int64_t max_positions, const int64_t *pos_dev, const float *iq_dev,
                                     const float *iw_dev, void *const *kcodes_dev, float *const *kscales_dev,
                                     const float *lut_dev, float *scores_dev, int32_t *sel_dev, int32_t *nanc_dev)
{
    (void)stream, (void)which, (void)nq, (void)idx_heads, (void)idx_dim, (void)k, (void)max_positions, (void)pos_dev;
    (void)iq_dev, (void)iw_dev, (void)kcodes_dev, (void)kscales_dev, (void)lut_dev, (void)scores_dev, (void)sel_dev;
    (void)nanc_dev;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_attn(void *stream, int32_t nq, int32_t nh, int32_t k, float att_scale, int32_t exp_portable,
                            const uint8_t *const *base_dev, const float *aq_dev, const int32_t *aidx_dev,
                            const int32_t *anv_dev, const float *lut_dev, float *pm_dev, float *ps_dev,
                            float *po_dev, int32_t *cnt_dev, float *ao_dev)
{
    (void)stream, (void)nq, (void)nh, (void)k, (void)att_scale, (void)exp_portable, (void)base_dev, (void)aq_dev;
    (void)aidx_dev, (void)anv_dev, (void)lut_dev, (void)pm_dev, (void)ps_dev, (void)po_dev, (void)cnt_dev, (void)ao_dev;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_prof_collect(dhs_ref_gpu *g, double *us, int32_t n_phases)
{
    (void)g, (void)us, (void)n_phases;
    return DHS_ERR_UNSUPPORTED;
}
#else
typedef int dhs_ref_gpu_stub_unused; /* ISO C: a translation unit is not empty */
#endif
