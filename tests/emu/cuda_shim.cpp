#include "cuda_shim.h"
#include <memory>
thread_local dim3e threadIdx, blockIdx;
dim3e gridDim, blockDim;
alignas(16) float emu_dyn[300000];
static std::unique_ptr<std::barrier<>> g_bar;
static std::vector<std::unique_ptr<std::barrier<>>> w_bar;
static std::atomic<int> g_or;
static float w_slot[2048];
void __syncthreads() { g_bar->arrive_and_wait(); }
int __syncthreads_or(int p)
{
    g_bar->arrive_and_wait();
    if (threadIdx.x == 0) g_or = 0;
    g_bar->arrive_and_wait();
    if (p) g_or = 1;
    g_bar->arrive_and_wait();
    int r = g_or;
    g_bar->arrive_and_wait();
    return r;
}
float __shfl_xor_sync(unsigned, float v, int off)
{
    unsigned t = threadIdx.x, w = t / 32;
    w_slot[t] = v;
    w_bar[w]->arrive_and_wait();
    float r = w_slot[(t & ~31u) | ((t & 31u) ^ (unsigned)off)];
    w_bar[w]->arrive_and_wait();
    return r;
}
void emu_launch(dim3e grid, dim3e block, std::function<void()> body)
{
    gridDim = grid;
    blockDim = block;
    unsigned nt = block.x;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                g_bar = std::make_unique<std::barrier<>>(nt);
                w_bar.clear();
                for (unsigned w = 0; w < (nt + 31) / 32; w++) w_bar.push_back(std::make_unique<std::barrier<>>(std::min(32u, nt - w * 32)));
                std::vector<std::thread> th;
                for (unsigned t = 0; t < nt; t++)
                    th.emplace_back([=] {
                        threadIdx = dim3e{t, 0, 0};
                        blockIdx = dim3e{x, y, z};
                        body();
                    });
                for (auto &h : th) h.join();
            }
}
