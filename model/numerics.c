/* numerics.c - the reference model's number formats and fixed-order kernels:
 * FP8 E4M3 / BF16 codecs, the 656-byte row format, the fixed-order dot
 * product, the deterministic top-k, softmax and
 * sampling. Everything here is a pure function of its inputs. */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "model/model.h"

/* ------------------------------------------------------------- FP8 E4M3 */
static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float dhs_ref_fp8_decode(uint8_t b)
{
    int sign = b >> 7, e = (b >> 3) & 15, mant = b & 7;
    float v;
    if (e == 15 && mant == 7) return NAN;
    if (e == 0)
        v = ldexpf((float)mant, -9); /* subnormal: mant * 2^-9 */
    else
        v = ldexpf((float)(8 + mant), e - 10); /* (1 + mant/8) * 2^(e-7) */
    return sign ? -v : v;
}

uint8_t dhs_ref_fp8_encode(float x)
{
    uint8_t sign = (f2u(x) >> 31) ? 0x80 : 0;
    float a = fabsf(x);
    if (isnan(x)) return 0x7f;
    if (a >= 448.0f) return sign | 0x7e; /* saturate to the largest finite */
    if (a < 0.015625f) {                  /* below 2^-6: subnormal grid of 2^-9 */
        float q = nearbyintf(a * 512.0f); /* round half to even (default mode) */
        return sign | (uint8_t)q;         /* q == 8 is 0x08 = 2^-6, correct */
    }
    uint32_t u = f2u(a);
    int e = (int)((u >> 23) & 255) - 127; /* -6 .. 8 */
    uint32_t mant = u & 0x7fffff;
    uint32_t keep = mant >> 20, rem = mant & 0xfffff;
    if (rem > 0x80000 || (rem == 0x80000 && (keep & 1))) keep++;
    if (keep == 8) {
        keep = 0;
        e++;
    }
    uint32_t code = ((uint32_t)(e + 7) << 3) | keep;
    if (code > 0x7e) code = 0x7e;
    return sign | (uint8_t)code;
}

uint16_t dhs_ref_bf16_encode(float x)
{
    uint32_t u = f2u(x);
    if (isnan(x)) return 0x7fc0;
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float dhs_ref_bf16_decode(uint16_t b) { return u2f((uint32_t)b << 16); }

/* ------------------------------------------------------------- rows
 * [0,512)   512 x e4m3: NoPE latent, tile i = values [128i, 128i+128)
 * [512,528) 4 x fp32 (host byte order): tile scales, powers of two
 * [528,656) 64 x bf16: RoPE part */
float dhs_ref_fp8_scale(const float *v, int32_t n)
{
    float amax = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        float a = fabsf(v[i]);
        if (a > amax) amax = a;
    }
    if (amax < 1e-4f) amax = 1e-4f;
    /* smallest power of two >= amax / 448 */
    float r = amax / 448.0f;
    int e;
    float f = frexpf(r, &e); /* r = f * 2^e, f in [0.5, 1) */
    return f == 0.5f ? ldexpf(1.0f, e - 1) : ldexpf(1.0f, e);
}

static float tile_scale(const float *v) { return dhs_ref_fp8_scale(v, DHS_REF_TILE); }

void dhs_ref_row_encode(const float lat[DHS_REF_LAT], uint8_t row[DHS_REF_ROW_BYTES])
{
    float scales[DHS_REF_NOPE / DHS_REF_TILE];
    for (int t = 0; t < DHS_REF_NOPE / DHS_REF_TILE; t++) {
        float sc = tile_scale(lat + t * DHS_REF_TILE);
        scales[t] = sc;
        for (int i = 0; i < DHS_REF_TILE; i++)
            row[t * DHS_REF_TILE + i] = dhs_ref_fp8_encode(lat[t * DHS_REF_TILE + i] / sc);
    }
    memcpy(row + DHS_REF_NOPE, scales, sizeof scales);
    for (int i = 0; i < DHS_REF_ROPE; i++) {
        uint16_t b = dhs_ref_bf16_encode(lat[DHS_REF_NOPE + i]);
        memcpy(row + DHS_REF_NOPE + 16 + 2 * i, &b, 2);
    }
}

/* Decoding goes through a 256-entry table (faster than bit tricks without
   F16C/AVX2 at -O2); the table holds dhs_ref_fp8_decode of every code and the
   power-of-two tile scale multiplies exactly. */
static float fp8_table[256];
static pthread_once_t fp8_once = PTHREAD_ONCE_INIT;

static void fp8_table_init(void)
{
    for (int i = 0; i < 256; i++) fp8_table[i] = dhs_ref_fp8_decode((uint8_t)i);
}

const float *dhs_ref_fp8_table(void)
{
    pthread_once(&fp8_once, fp8_table_init);
    return fp8_table;
}

void dhs_ref_row_decode(const uint8_t row[DHS_REF_ROW_BYTES], float lat[DHS_REF_LAT])
{
    pthread_once(&fp8_once, fp8_table_init);
    const float *lut = fp8_table;
    float scales[DHS_REF_NOPE / DHS_REF_TILE];
    memcpy(scales, row + DHS_REF_NOPE, sizeof scales);
    for (int t = 0; t < DHS_REF_NOPE / DHS_REF_TILE; t++) {
        float sc = scales[t];
        for (int i = 0; i < DHS_REF_TILE; i++) lat[t * DHS_REF_TILE + i] = lut[row[t * DHS_REF_TILE + i]] * sc;
    }
    for (int i = 0; i < DHS_REF_ROPE; i++) {
        uint16_t h;
        memcpy(&h, row + DHS_REF_NOPE + 16 + 2 * i, 2);
        lat[DHS_REF_NOPE + i] = dhs_ref_bf16_decode(h);
    }
}

/* ------------------------------------------------------------- dot */
float dhs_ref_dot(const float *a, const float *b, int32_t n)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------------- attention's fused sums
 * fmaf is one correctly rounded IEEE operation wherever it runs: the FMA
 * instruction, glibc's software fmaf, CUDA's __fmaf_rn. So the clones below
 * (the "fma" one is picked at load time on a CPU with FMA, and vectorises the
 * 8 independent lanes; the default one calls libm's fmaf) give the same bits
 * as each other and as the GPU kernels. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DHS_NO_FMA_CLONES)
#define FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define FMA_CLONES
#endif

FMA_CLONES float dhs_ref_dot_fma(const float *a, const float *b, int32_t n)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] = fmaf(a[i + l], b[i + l], acc[l]);
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s = fmaf(a[i], b[i], s);
    return s;
}

FMA_CLONES void dhs_ref_axpy_fma(float a, const float *x, float *y, int32_t n)
{
    for (int32_t i = 0; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

FMA_CLONES void dhs_ref_index_block_fma(const float *qt, int32_t qld, int32_t H, int32_t D, const float *kb, float *acc)
{
    for (int32_t i = 0; i < D; i++) {
        const float *kv = kb + (int64_t)i * DHS_REF_KEY_BLOCK;
        for (int32_t h = 0; h < H; h++) {
            const float qv = qt[(int64_t)i * qld + h];
            float *a = acc + (int64_t)h * DHS_REF_KEY_BLOCK;
            for (int l = 0; l < DHS_REF_KEY_BLOCK; l++) a[l] = fmaf(qv, kv[l], a[l]);
        }
    }
}

/* ------------------------------------------------------------- exp
 * Every step is one IEEE float operation (the build does not contract), so
 * the CUDA twin (refmodel.cu: __fmul_rn, __fadd_rn, rintf) gives the same bits. */
float dhs_ref_expf(float x)
{
    if (x < -87.0f) return 0.0f;
    if (x > 88.0f) return INFINITY;
    float kf = nearbyintf(x * 1.44269504f);   /* round half even: |kf| <= 127 */
    float r = x - kf * 0.693145752f;          /* ln 2, high part (exact product: 16 bits) */
    r = r - kf * 1.42860677e-06f;             /* ln 2, low part */
    float p = 1.38888889e-03f;                /* 1/720 */
    p = p * r + 8.33333333e-03f;              /* 1/120 */
    p = p * r + 4.16666667e-02f;              /* 1/24 */
    p = p * r + 1.66666667e-01f;              /* 1/6 */
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * u2f((uint32_t)((int32_t)kf + 127) << 23); /* 2^kf, kf in [-126, 127] */
}

/* ------------------------------------------------------------- top-k */
uint64_t dhs_ref_topk_key(float score, int64_t s)
{
    uint32_t u = f2u(score == 0.0f ? 0.0f : score); /* -0 -> +0 */
    uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((uint64_t)ord << 32) | (uint64_t)(0xffffffffu - (uint32_t)s);
}

/* the score a packed key was made from (-0 comes back as +0) */
static float heap_score(uint64_t key)
{
    uint32_t ord = (uint32_t)(key >> 32);
    return u2f((ord & 0x80000000u) ? (ord & 0x7fffffffu) : ~ord);
}

static void sift_down(uint64_t *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l] < h[m]) m = l;
        if (r < n && h[r] < h[m]) m = r;
        if (m == i) return;
        uint64_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

int32_t dhs_ref_topk(const float *scores, int64_t n, int32_t k, int32_t *sel, uint64_t *h)
{
    int32_t cnt = n < k ? (int32_t)n : k;
    /* min-heap of the best cnt keys seen so far; keys are distinct (s differs) */
    for (int32_t i = 0; i < cnt; i++) {
        assert(!isnan(scores[i]));
        h[i] = dhs_ref_topk_key(scores[i], i);
    }
    for (int32_t i = cnt / 2 - 1; i >= 0; i--) sift_down(h, cnt, i);
    /* Candidates arrive in ascending s, so one whose score equals the current
       minimum's loses the tie (higher s): only score > thr can enter. */
    float thr = 0.0f;
    if (cnt > 0) thr = heap_score(h[0]);
    for (int64_t s = cnt; s < n; s++) {
        assert(!isnan(scores[s]));
        if (!(scores[s] > thr)) continue;
        h[0] = dhs_ref_topk_key(scores[s], s);
        sift_down(h, cnt, 0);
        thr = heap_score(h[0]);
    }
    /* heap sort: popping the minimum to the end leaves the keys descending */
    for (int32_t end = cnt - 1; end > 0; end--) {
        uint64_t t = h[0];
        h[0] = h[end];
        h[end] = t;
        sift_down(h, end, 0);
    }
    for (int32_t i = 0; i < cnt; i++) sel[i] = (int32_t)(0xffffffffu - (uint32_t)(h[i] & 0xffffffffu));
    for (int32_t i = cnt; i < k; i++) sel[i] = -1;
    return cnt;
}

/* ------------------------------------------------------------- distributions */
/* The result of "b = 0; for i: if (x[i] > x[b]) b = i" (the rule), without its chain of dependent
   compares: a NaN at 0 is never beaten (0); otherwise NaNs never win, so the answer is the first i
   holding the largest non-NaN value. The maximum takes 8 independent lanes (the loop vectorises; a
   lane keeps its value on a NaN or an equal value, -0 == +0 included), then one scan finds the first
   i equal to it. At the reference model's 256 logits this is the engine's verification cost per query. */
int32_t dhs_ref_argmax(const float *x, int32_t n)
{
    if (n <= 1 || x[0] != x[0]) return 0;
    float l[8];
    for (int j = 0; j < 8; j++) l[j] = x[0];
    int32_t i = 1;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) l[j] = x[i + j] > l[j] ? x[i + j] : l[j];
    for (; i < n; i++) l[0] = x[i] > l[0] ? x[i] : l[0];
    float mx = l[0];
    for (int j = 1; j < 8; j++) mx = l[j] > mx ? l[j] : mx;
    for (i = 0; i < n; i++)
        if (x[i] == mx) break;
    return i;
}

void dhs_ref_softmax(const float *x, int32_t n, float temperature, float *p)
{
    float mx = x[0];
    for (int32_t i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    float sum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        p[i] = expf((x[i] - mx) / temperature);
        sum += p[i];
    }
    for (int32_t i = 0; i < n; i++) p[i] /= sum;
}

int32_t dhs_ref_sample(const float *p, int32_t n, float u)
{
    float total = 0.0f;
    for (int32_t i = 0; i < n; i++) total += p[i];
    float target = u * total, cum = 0.0f;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] <= 0.0f) continue;
        cum += p[i];
        last = i;
        if (target < cum) return i;
    }
    return last;
}
