/* test_plan.c - the memory planner (sim/): the seed's figures, the ring
   and staging formulas, hand-computed bytes for a small custom arch, shape
   properties (hierarchical < resident at long context, sessions monotone in
   HBM) and error paths of the custom-arch JSON. Prints every check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dhs_plan.h"
#include "sim/plan.h"

static int n_checks, n_failed;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        n_checks++;                                                          \
        int ok_ = (cond) ? 1 : 0;                                            \
        if (!ok_) n_failed++;                                                \
        printf("%s ", ok_ ? "ok  " : "FAIL");                                \
        printf(__VA_ARGS__);                                                 \
        if (!ok_) printf("   [%s:%d: %s]", __FILE__, __LINE__, #cond);       \
        printf("\n");                                                        \
    } while (0)

/* |got - want| <= tol * |want| */
#define CHECK_REL(got, want, tol, what)                                                   \
    do {                                                                                  \
        double g_ = (got), w_ = (want);                                                   \
        CHECK(fabs(g_ - w_) <= (tol) * fabs(w_), "%s = %.6f, want %.6f within %.2f%%", what, \
              g_, w_, 100.0 * (tol));                                                     \
    } while (0)

static dhs_plan_arch arch, arch2; /* large: static */

static void load_preset(const char *name, dhs_plan_arch *a)
{
    char err[256];
    dhs_status s = dhs_plan_preset(name, a, err, sizeof err);
    if (s != DHS_OK) {
        printf("FAIL cannot load preset %s: %s\n", name, err);
        exit(1);
    }
}

static dhs_plan_result plan(const dhs_plan_arch *a, const dhs_plan_params *p)
{
    dhs_plan_result r;
    char err[256];
    dhs_status s = dhs_plan_compute(a, p, &r, err, sizeof err);
    if (s != DHS_OK) {
        printf("FAIL dhs_plan_compute: %s\n", err);
        exit(1);
    }
    return r;
}

/* ---------------------------------------------------------------- seed 000 */
static void test_seed_figures(void)
{
    printf("-- seed 000 figures (GLM-5.3, 100K)\n");
    load_preset("glm-5.3", &arch);
    CHECK(dhs_plan_arch_sources(&arch) == 78, "glm-5.3 has 78 payload sources (%d)",
          dhs_plan_arch_sources(&arch));
    CHECK(dhs_plan_arch_producers(&arch) == 21, "glm-5.3 has 21 index producers (%d)",
          dhs_plan_arch_producers(&arch));
    CHECK(arch.n_own + arch.n_follow == 78, "glm-5.3: 21 OWN + 57 FOLLOW layers (%d + %d)", arch.n_own,
          arch.n_follow);

    dhs_plan_params p = dhs_plan_params_default();
    p.context = 100000;
    dhs_plan_result r = plan(&arch, &p);
    CHECK_REL(dhs_plan_gib(r.resident_total), 4.444, 0.01, "resident GiB/session (seed 4.444, 1%)");
    CHECK_REL(dhs_plan_gib(r.resident_total), 4.444, 0.0005, "resident GiB/session (seed 4.444, 0.05%)");
    CHECK(r.hot_rows == 4096 && r.tail_rows == 64, "defaults: B = 2k = 4096, T = p = 64 (%d, %d)", r.hot_rows,
          r.tail_rows);
    CHECK_REL(dhs_plan_gib(r.hier_no_meta), 0.432, 0.005, "hier GiB/session without metadata (seed 0.432)");
    CHECK(r.hier_total > r.hier_no_meta && r.hier_total - r.hier_no_meta == r.metadata,
          "hier = no-metadata figure + metadata (%llu B)", (unsigned long long)r.metadata);
    CHECK_REL(dhs_plan_gib(r.hier_total), 0.4428, 0.002, "hier GiB/session with our metadata");
    CHECK(r.sessions_resident == 20, "90 GiB free: %lld resident sessions (seed: about 20)",
          (long long)r.sessions_resident);
    /* host: 0.93 TB for 208 sessions (decimal TB) */
    CHECK_REL(208.0 * (double)r.host_per_session / 1e12, 0.93, 0.01, "host TB for 208 sessions (seed 0.93)");

    /* DFlash2: W = 2048, K_max = 8, 12288 B per draft row */
    p.drafter_window = 2048;
    p.k_max = 8;
    p.draft_row_bytes = 12288;
    p.slots = 35;
    r = plan(&arch, &p);
    CHECK(r.ring_rows == 2176, "ring rows R_d = %lld (want 2176)", (long long)r.ring_rows);
    CHECK_REL(dhs_plan_gib(r.ring_total), 0.87, 0.01, "ring GiB over 35 slots (seed 0.87)");
    CHECK_REL(dhs_plan_gib(r.ring), 0.025, 0.01, "ring GiB per session (seed 0.025)");
    CHECK(r.staging_needed, "staging needed: K_max*k = 16384 > B = 4096");
    CHECK_REL(dhs_plan_gib(r.staging_total), 1.23, 0.01, "staging GiB, 4 live sources (seed 1.23)");
    CHECK_REL(dhs_plan_gib(r.ring + r.staging), 0.060, 0.01, "ring + staging per session (seed 0.060)");
    CHECK_REL(dhs_plan_gib(r.hier_no_meta), 0.492, 0.005, "DFlash2 hier without metadata (seed 0.492)");
    CHECK_REL(dhs_plan_gib(r.resident_total), 4.469, 0.001, "DFlash2 resident (seed 4.469)");

    p.live_sources = 78;
    dhs_plan_result r78 = plan(&arch, &p);
    CHECK_REL(dhs_plan_gib(r78.staging_total), 24.0, 0.01, "staging GiB, 78 live sources (seed 24.0)");
    CHECK_REL((double)r78.staging_total / (double)r.staging_total, 19.5, 1e-12, "staging 78 / 4 (seed 19.5x)");
}

/* ---------------------------------------------------------------- formulas */
static void test_ring_and_staging_formulas(void)
{
    printf("-- ring and staging formulas (DESIGN §6)\n");
    CHECK(dhs_ring_rows(2048, 8, 64) == 2176, "R_d(W=2048, K=8, p=64) = %lld", (long long)dhs_ring_rows(2048, 8, 64));
    CHECK(dhs_ring_rows(2048, 1, 64) == 2112, "R_d(W=2048, K=1, p=64) = %lld (p*ceil(2112/64))",
          (long long)dhs_ring_rows(2048, 1, 64));
    CHECK(dhs_ring_rows(0, 8, 64) == 128, "R_d(W=0, K=8, p=64) = %lld (p*ceil(71/64))",
          (long long)dhs_ring_rows(0, 8, 64));
    CHECK(dhs_staging_bytes(4, 35, 8, 2048, 576) == 4ull * 35 * 8 * 2048 * 576,
          "M_stage = chi*N*K_max*k*d_KV");

    /* the planner uses exactly these functions */
    load_preset("glm-5.3", &arch);
    dhs_plan_params p = dhs_plan_params_default();
    p.drafter_window = 1000;
    p.k_max = 6;
    p.draft_row_bytes = 4096;
    p.slots = 7;
    p.page_rows = 32;
    p.hot_rows = 1024;
    dhs_plan_result r = plan(&arch, &p);
    CHECK(r.ring_rows == dhs_ring_rows(1000, 6, 32), "plan ring rows = dhs_ring_rows (%lld)", (long long)r.ring_rows);
    CHECK(r.ring_total == dhs_ring_bytes(1000, 6, 32, 7, 4096), "plan ring total = dhs_ring_bytes");
    CHECK(r.staging_total == dhs_staging_bytes(4, 7, 6, 2048, 576), "plan staging total = dhs_staging_bytes");

    p.k_max = 2;
    p.hot_rows = 4096; /* 2 * 2048 <= 4096: the union always fits the hot cache */
    r = plan(&arch, &p);
    CHECK(!r.staging_needed && r.staging == 0 && r.staging_total == 0, "no staging when K_max*k <= B");
}

/* A small arch computed by hand: one group of two sources (32 B and 64 B
   rows, m = 2) with 16-byte index keys, one group of one 16-B source. */
static void test_hand_computed(void)
{
    printf("-- hand-computed bytes for a small custom arch\n");
    const char *js =
        "{\"name\":\"tiny\",\"k\":8,\"live_sources\":2,"
        "\"window\":{\"rows\":4,\"layers\":3,\"row_bytes\":16},"
        "\"groups\":[{\"sources\":2,\"row_bytes\":[32,64],\"m\":2,\"index_key_bytes\":16},"
        "{\"row_bytes\":16}]}";
    char err[256];
    dhs_status s = dhs_plan_arch_from_json(js, &arch, err, sizeof err);
    CHECK(s == DHS_OK, "tiny arch parses (%s)", s == DHS_OK ? "ok" : err);
    if (s != DHS_OK) return;
    CHECK(dhs_plan_arch_sources(&arch) == 3 && arch.n_groups == 2, "tiny: 3 sources, 2 groups");
    CHECK(dhs_plan_arch_index_stores(&arch) == 1 && dhs_plan_arch_producers(&arch) == 1,
          "tiny: one index store, one producer (group 2 has no keys)");

    dhs_plan_params p = dhs_plan_params_default();
    p.context = 1001; /* group 1: ceil(1001/2) = 501 rows -> 512; group 2: 1001 -> 1008 */
    p.page_rows = 16;
    p.hot_rows = 20; /* -> 32 */
    p.tail_rows = 5; /* -> 16 */
    p.k_max = 4;     /* 4 * 8 = 32 > B = 32? no: equal, so no staging */
    p.slots = 3;
    p.hbm_gib = 1.0;
    p.weights_gib = 0.5;
    p.host_gib = 0.001;
    dhs_plan_result r = plan(&arch, &p);
    CHECK(r.hot_rows == 32 && r.tail_rows == 16, "B, T rounded up to pages (%d, %d)", r.hot_rows, r.tail_rows);
    CHECK(r.res_payload == 512ull * 96 + 1008ull * 16, "payload = 512*96 + 1008*16 = %llu",
          (unsigned long long)r.res_payload);
    CHECK(r.res_index == 512ull * 16, "index keys = 512*16 = %llu", (unsigned long long)r.res_index);
    CHECK(r.res_window == 4ull * 3 * 16, "window = 4*3*16 = %llu", (unsigned long long)r.res_window);
    CHECK(r.resident_total == r.res_payload + r.res_index + r.res_window, "resident = payload + keys + window");
    CHECK(r.hot == 32ull * 112 && r.tail == 16ull * 112, "hot = 32*112, tail = 16*112");
    CHECK(r.meta_reverse == (512ull * 4 + 8 * 8) + (1008ull * 4 + 16 * 8),
          "reverse index + bitmap = %llu", (unsigned long long)r.meta_reverse);
    CHECK(r.meta_slots == 2ull * 32 * 24, "slot tables = groups*B*24 = %llu", (unsigned long long)r.meta_slots);
    CHECK(r.meta_pages == (32ull * (1 + 8) + 3 * 4 * 2) + (63ull * (1 + 4) + 3 * 4 * 1),
          "page maps = %llu", (unsigned long long)r.meta_pages);
    CHECK(!r.staging_needed && r.staging == 0, "K_max*k = 32 = B: no staging");
    CHECK(r.hier_total == r.index_keys + r.hot + r.tail + r.window + r.metadata, "hier = sum of its parts");
    CHECK(r.host_per_session == r.res_payload, "host = payload");
    CHECK(r.sessions_resident == (int64_t)floor(0.5 * 1073741824.0 / (double)r.resident_total),
          "sessions_resident = floor(free / resident) = %lld", (long long)r.sessions_resident);
    CHECK(r.sessions_host == (int64_t)floor(0.001 * 1073741824.0 / (double)r.host_per_session),
          "sessions_host = floor(host / host per session) = %lld", (long long)r.sessions_host);

    p.k_max = 5; /* 40 > 32: staging of chi * K_max * k * max_row = 2*5*8*64 */
    r = plan(&arch, &p);
    CHECK(r.staging_needed && r.staging == 2ull * 5 * 8 * 64, "staging share = 2*5*8*64 = %llu",
          (unsigned long long)r.staging);
    CHECK(r.staging_total == 3 * r.staging, "staging total = slots * share");

    /* page_rows = 1: the raw DESIGN §8 formula L * (sum d/m + sum d_idx/m) */
    load_preset("glm-5.3", &arch);
    p = dhs_plan_params_default();
    p.page_rows = 1;
    p.context = 100000;
    r = plan(&arch, &p);
    CHECK(r.resident_total == 100000ull * (78 * 576 + 21 * 132), "p=1: resident = L*(78*576 + 21*132) = %llu",
          (unsigned long long)r.resident_total);
}

/* ---------------------------------------------------------------- properties */
static void test_properties(void)
{
    printf("-- hierarchical < resident at long context; sessions monotone in HBM\n");
    for (int i = 0; i < dhs_plan_preset_count(); i++) {
        const char *name = dhs_plan_preset_name(i);
        load_preset(name, &arch);
        static const int64_t ctx[] = {32768, 100000, 1000000};
        for (int c = 0; c < 3; c++) {
            dhs_plan_params p = dhs_plan_params_default();
            p.context = ctx[c];
            dhs_plan_result r = plan(&arch, &p);
            CHECK(r.hier_total < r.resident_total, "%s @%lld: hier %.4f < resident %.4f GiB", name,
                  (long long)ctx[c], dhs_plan_gib(r.hier_total), dhs_plan_gib(r.resident_total));
        }
        /* monotone in HBM */
        int64_t prev_res = -1, prev_hier = -1;
        int mono = 1;
        dhs_plan_result first = {0}, last = {0};
        for (double hbm = 40.0; hbm <= 200.0; hbm += 0.5) {
            dhs_plan_params p = dhs_plan_params_default();
            p.hbm_gib = hbm;
            dhs_plan_result r = plan(&arch, &p);
            if (r.sessions_resident < prev_res || r.sessions_hier < prev_hier) mono = 0;
            if (prev_res < 0) first = r;
            prev_res = r.sessions_resident;
            prev_hier = r.sessions_hier;
            last = r;
        }
        CHECK(mono, "%s: sessions non-decreasing in HBM 40..200 GiB", name);
        CHECK(last.sessions_hier > first.sessions_hier && last.sessions_hier >= last.sessions_resident,
              "%s: hier sessions grow %lld -> %lld, >= resident (%lld)", name, (long long)first.sessions_hier,
              (long long)last.sessions_hier, (long long)last.sessions_resident);
        /* resident grows with context; hierarchical grows slower */
        dhs_plan_params p = dhs_plan_params_default();
        p.context = 50000;
        dhs_plan_result a = plan(&arch, &p);
        p.context = 200000;
        dhs_plan_result b = plan(&arch, &p);
        CHECK(b.resident_total - a.resident_total > b.hier_total - a.hier_total,
              "%s: resident grows faster with context than hierarchical", name);
    }
    /* weights above HBM: no sessions, no error */
    load_preset("glm-5.3", &arch);
    dhs_plan_params p = dhs_plan_params_default();
    p.hbm_gib = 40;
    p.weights_gib = 60;
    dhs_plan_result r = plan(&arch, &p);
    CHECK(r.sessions_hier == 0 && r.sessions_resident == 0 && r.free_gib < 0, "no free HBM -> 0 sessions");
}

/* ---------------------------------------------------------------- presets */
static void test_presets(void)
{
    printf("-- presets\n");
    load_preset("deepseek-v3.2", &arch);
    CHECK(arch.n_groups == 61 && dhs_plan_arch_sources(&arch) == 61 && arch.k == 2048 &&
              arch.groups[0].sum_row_bytes == 656 && arch.groups[0].index_key_bytes == 132,
          "deepseek-v3.2: 61 OWN layers, 656-B rows, 132-B keys, k=2048");
    dhs_plan_params p = dhs_plan_params_default();
    p.page_rows = 1;
    p.context = 1;
    dhs_plan_result r = plan(&arch, &p);
    CHECK(r.resident_total == 48068, "deepseek-v3.2: 48,068 B per token (FACTS.md §1): %llu",
          (unsigned long long)r.resident_total);

    load_preset("glm-5.2", &arch);
    r = plan(&arch, &p);
    CHECK(r.resident_total == 78 * 656 + 21 * 132, "glm-5.2: 78*656 + 21*132 = %llu B per token",
          (unsigned long long)r.resident_total);

    load_preset("deepseek-v4.1-flash", &arch);
    CHECK(arch.n_groups == 4 && dhs_plan_arch_producers(&arch) == 8 && arch.k == 512 &&
              arch.n_own == 4 && arch.n_reindex == 4 && arch.n_reuse == 30,
          "deepseek-v4.1-flash: 4 sources, 8 producers (4 OWN + 4 REINDEX), 30 REUSE, k=512");
    p.context = 1000;
    r = plan(&arch, &p);
    /* sources 2/8/14 at m=2 (500 rows each), source 20 at m=1 (1000 rows) */
    CHECK(r.res_payload == (3ull * 500 + 1000) * 528 && r.res_index == (3ull * 500 + 1000) * 132,
          "deepseek-v4.1-flash: compressed rows counted at m (payload %llu B)", (unsigned long long)r.res_payload);

    char err[256];
    CHECK(dhs_plan_preset("glm-9", &arch, err, sizeof err) == DHS_ERR_INVALID_ARG && strstr(err, "glm-9"),
          "unknown preset rejected: %s", err);
}

/* ---------------------------------------------------------------- errors */
static void expect_bad(const char *js, const char *needle)
{
    char err[256] = "";
    dhs_status s = dhs_plan_arch_from_json(js, &arch2, err, sizeof err);
    CHECK(s == DHS_ERR_INVALID_ARG && strstr(err, needle) != NULL, "bad arch rejected (%s): %s", needle, err);
}

static void test_bad_json(void)
{
    printf("-- bad custom-arch JSON\n");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":576}", "malformed");
    expect_bad("not json", "malformed");
    expect_bad("", "malformed");
    expect_bad("[1,2]", "object");
    expect_bad("{\"k\":2048}", "groups");
    expect_bad("{\"groups\":[{\"row_bytes\":576}]}", "\"k\"");
    expect_bad("{\"k\":2048,\"groups\":[]}", "non-empty");
    expect_bad("{\"k\":2048,\"groups\":[{\"sources\":4}]}", "row_bytes");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":-576}]}", "row_bytes");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":576.5}]}", "integer");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":\"576\"}]}", "row_bytes");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":132}]}", "multiple of 16");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":576,\"sorces\":4}]}", "unknown key \"sorces\"");
    expect_bad("{\"k\":2048,\"lyers\":3,\"groups\":[{\"row_bytes\":576}]}", "unknown key \"lyers\"");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":576,\"m\":0}]}", "\"m\"");
    expect_bad("{\"k\":-1,\"groups\":[{\"row_bytes\":576}]}", "\"k\"");
    expect_bad("{\"k\":2048,\"live_sources\":5,\"groups\":[{\"sources\":4,\"row_bytes\":576}]}", "live_sources");
    expect_bad("{\"k\":2048,\"groups\":[{\"sources\":3,\"row_bytes\":[576,576]}]}", "sources");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":576,\"repeat\":100000}]}", "repeat");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":576}],\"window\":{\"rows\":128}}", "layers");
    expect_bad("{\"k\":2048,\"groups\":[{\"row_bytes\":576}],\"consumers\":{\"own\":-3}}", "own");
    expect_bad("{\"k\":2048,\"name\":7,\"groups\":[{\"row_bytes\":576}]}", "name");

    char err[256] = "";
    dhs_status s = dhs_plan_arch_load("/nonexistent/dir/arch.json", &arch2, err, sizeof err);
    CHECK(s == DHS_ERR_INVALID_ARG && strstr(err, "/nonexistent/dir/arch.json"), "missing file rejected: %s", err);

    /* a file with a custom arch equal to the glm-5.3 preset gives the same plan */
    char path[] = "/tmp/dhs_test_plan_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "temporary file %s", path);
    if (fd < 0) return;
    const char *glm = "{\"name\":\"glm-5.3-by-hand\",\"k\":2048,\"live_sources\":4,"
                      "\"groups\":[{\"repeat\":2,\"row_bytes\":576,\"index_key_bytes\":132},"
                      "{\"repeat\":19,\"sources\":4,\"row_bytes\":[576,576,576,576],\"index_key_bytes\":132}]}";
    FILE *f = fdopen(fd, "w");
    fputs(glm, f);
    fclose(f);
    s = dhs_plan_arch_load(path, &arch2, err, sizeof err);
    CHECK(s == DHS_OK, "custom glm-5.3 file loads (%s)", s == DHS_OK ? "ok" : err);
    load_preset("glm-5.3", &arch);
    dhs_plan_params p = dhs_plan_params_default();
    p.k_max = 8;
    p.drafter_window = 2048;
    p.draft_row_bytes = 12288;
    dhs_plan_result a = plan(&arch, &p), b = plan(&arch2, &p);
    CHECK(a.resident_total == b.resident_total && a.hier_total == b.hier_total &&
              a.staging_total == b.staging_total && a.metadata == b.metadata,
          "custom file = preset: resident %llu, hier %llu", (unsigned long long)b.resident_total,
          (unsigned long long)b.hier_total);
    CHECK(arch2.n_follow == 57 && arch2.n_own == 21, "consumer counts derived: 21 OWN, 57 FOLLOW");

    /* malformed file */
    f = fopen(path, "w");
    fputs("{\"k\": 2048, \"groups\": [", f);
    fclose(f);
    s = dhs_plan_arch_load(path, &arch2, err, sizeof err);
    CHECK(s == DHS_ERR_INVALID_ARG && strstr(err, "malformed") && strstr(err, path), "malformed file: %s", err);
    unlink(path);
}

static void expect_bad_params(const dhs_plan_params *p, const char *needle)
{
    char err[256] = "";
    dhs_plan_result r;
    dhs_status s = dhs_plan_compute(&arch, p, &r, err, sizeof err);
    CHECK(s == DHS_ERR_INVALID_ARG && strstr(err, needle), "bad params rejected (%s): %s", needle, err);
}

static void test_bad_params(void)
{
    printf("-- bad parameters\n");
    load_preset("glm-5.3", &arch);
    dhs_plan_params p = dhs_plan_params_default();
    p.context = 0;
    expect_bad_params(&p, "context");
    p = dhs_plan_params_default();
    p.page_rows = 0;
    expect_bad_params(&p, "page");
    p = dhs_plan_params_default();
    p.live_sources = 79;
    expect_bad_params(&p, "live sources");
    p = dhs_plan_params_default();
    p.tail_rows = 0;
    expect_bad_params(&p, "tail");
    p = dhs_plan_params_default();
    p.hbm_gib = -1;
    expect_bad_params(&p, "GiB");
    p = dhs_plan_params_default();
    p.weights_gib = NAN;
    expect_bad_params(&p, "GiB");
    p = dhs_plan_params_default();
    p.k_max = 0;
    expect_bad_params(&p, "k_max");
    p = dhs_plan_params_default();
    p.context = DHS_PLAN_MAX_CONTEXT;
    p.draft_row_bytes = (uint64_t)1 << 32;
    p.drafter_window = (int64_t)1 << 32;
    p.k_max = 1024;
    p.tail_rows = 1024;
    p.slots = 1 << 20;
    {
        char err[256] = "";
        dhs_plan_result r;
        dhs_status s = dhs_plan_compute(&arch, &p, &r, err, sizeof err);
        CHECK(s == DHS_OK || strstr(err, "overflow"), "huge inputs: computed or overflow reported (%s)",
              s == DHS_OK ? "ok" : err);
    }
}

int main(void)
{
    test_seed_figures();
    test_ring_and_staging_formulas();
    test_hand_computed();
    test_properties();
    test_presets();
    test_bad_json();
    test_bad_params();
    printf("test_plan: %d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
