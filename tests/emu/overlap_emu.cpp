/* overlap_emu.cpp - the kernels of dev/overlap/overlap.cu run through cuda_shim.h
 * (run_overlap_emu.sh extracts them, without the launchers, into
 * overlap_kernels.inc); the wrappers mirror the launchers' grids. */
#include "cuda_shim.h"
#include "overlap_kernels.inc"
extern "C" {
void emu_scores(const dhs_ov_shape *s, int which, const dhs_ov_args *a)
{
    dhs_ov_shape sh = *s;
    emu_launch(dim3e{(unsigned)s->nq, (unsigned)((s->k + OV_EB - 1) / OV_EB), 1}, dim3e{OV_ST, 1, 1},
               [&] { k_ov_scores(sh, which, a->q, a->base, a->loc, a->miss, a->lut, a->scores); });
}
void emu_reduce(const dhs_ov_shape *s, const dhs_ov_args *a)
{
    dhs_ov_shape sh = *s;
    emu_launch(dim3e{(unsigned)s->nq, 1, G_NOPE / OV_DB}, dim3e{OV_RT, 1, 1}, [&] {
        k_ov_reduce(sh, DHS_OV_ALL, sh.k, 1, a->base, a->loc, a->miss, a->scores, a->lut, a->out, NULL, NULL, NULL);
    });
}
void emu_partial(const dhs_ov_shape *s, int which, const dhs_ov_args *a)
{
    dhs_ov_shape sh = *s;
    emu_launch(dim3e{(unsigned)s->nq, (unsigned)((s->k + s->chunk - 1) / s->chunk), G_NOPE / OV_DB}, dim3e{OV_RT, 1, 1},
               [&] {
                   k_ov_reduce(sh, which, sh.chunk, 0, a->base, a->loc, a->miss, a->scores, a->lut, NULL, a->pm, a->pl,
                               a->pacc);
               });
}
void emu_merge(const dhs_ov_shape *s, const dhs_ov_args *a)
{
    dhs_ov_shape sh = *s;
    int C = (s->k + s->chunk - 1) / s->chunk;
    emu_launch(dim3e{(unsigned)(s->nq * s->nh), 1, 1}, dim3e{G_NOPE, 1, 1},
               [&] { k_ov_merge(sh, C, a->pm, a->pl, a->pacc, a->out); });
}
}
