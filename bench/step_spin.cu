/* step_spin.cu - control_bench's stand-in for an engine's step on the CUDA backend (--overlap): one
 * kernel that keeps the compute stream busy for a given time, with an event before and after each
 * round's step, so that the stream's idle time between two steps (what the host's round work exposes)
 * is measured on the device, not inferred from host clocks. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

static cudaStream_t g_stream;
static cudaEvent_t *g_start, *g_end;
static int g_n;

__global__ void step_spin_kernel(uint64_t ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

extern "C" void cb_step_free(void)
{
    for (int i = 0; i < g_n; i++) {
        if (g_start && g_start[i]) cudaEventDestroy(g_start[i]);
        if (g_end && g_end[i]) cudaEventDestroy(g_end[i]);
    }
    free(g_start);
    free(g_end);
    g_start = g_end = NULL;
    g_n = 0;
}

/* events for rounds 0 .. n - 1 on `stream` (the backend's compute stream); 0 on success */
extern "C" int cb_step_init(void *stream, int n)
{
    cb_step_free();
    g_stream = (cudaStream_t)stream;
    g_start = (cudaEvent_t *)calloc((size_t)n, sizeof(cudaEvent_t));
    g_end = (cudaEvent_t *)calloc((size_t)n, sizeof(cudaEvent_t));
    if (!g_start || !g_end) return -1;
    g_n = n;
    for (int i = 0; i < n; i++)
        if (cudaEventCreate(&g_start[i]) != cudaSuccess || cudaEventCreate(&g_end[i]) != cudaSuccess) return -1;
    return 0;
}

/* round t's step: its start event, `us` microseconds of one spinning thread, its end event */
extern "C" int cb_step_launch(int t, double us)
{
    if (t < 0 || t >= g_n) return -1;
    if (cudaEventRecord(g_start[t], g_stream) != cudaSuccess) return -1;
    step_spin_kernel<<<1, 1, 0, g_stream>>>((uint64_t)(us * 1000.0));
    if (cudaGetLastError() != cudaSuccess) return -1;
    return cudaEventRecord(g_end[t], g_stream) == cudaSuccess ? 0 : -1;
}

/* waits for round t's step (the engine reading its outputs) */
extern "C" int cb_step_wait(int t)
{
    if (t < 0 || t >= g_n) return -1;
    return cudaEventSynchronize(g_end[t]) == cudaSuccess ? 0 : -1;
}

/* after every step completed: microseconds the stream spent between step t - 1's end and step t's start
   (the publishes and launches of round t's control plane, plus whatever the host made it wait), and
   step t's own time; -1 on an error */
extern "C" double cb_step_gap_us(int t)
{
    float ms;
    if (t < 1 || t >= g_n || cudaEventElapsedTime(&ms, g_end[t - 1], g_start[t]) != cudaSuccess) return -1;
    return 1000.0 * (double)ms;
}

extern "C" double cb_step_us(int t)
{
    float ms;
    if (t < 0 || t >= g_n || cudaEventElapsedTime(&ms, g_start[t], g_end[t]) != cudaSuccess) return -1;
    return 1000.0 * (double)ms;
}
