/* locmeter.c - consecutive-step overlap and LRU hit rate of the model's own
 * selections (locmeter.h). Per tracked session and group: the round each row
 * was last selected in (for the overlap) and an exact LRU list of lru_rows
 * rows as index links over the row space (O(1) per access). */
#include <stdlib.h>
#include <string.h>

#include "model/locmeter.h"

typedef struct lm_state {
    uint32_t *last;    /* [positions] round + 1 the row was last selected in by query 0 (0: never) */
    uint32_t *lastq;   /* [positions] the query counter when the row was last selected by any query */
    uint32_t qc;       /* queries observed so far */
    int32_t *prev, *next; /* [positions] LRU links; prev == -2: not in the cache */
    int32_t head, tail, size;
    uint32_t last_round; /* round + 1 of the last observation (0: none) */
    int last_full;       /* that selection held k rows */
} lm_state;

typedef struct lm_sess {
    int32_t id; /* -1: free */
    lm_state *g;  /* [n_groups] (allocated lazily per group) */
} lm_sess;

struct dhs_ref_locmeter {
    int32_t ng, k, B, nt;
    int64_t P;
    lm_sess *t;
    dhs_ref_loc_group *acc; /* sums: alpha and random summed, divided in get */
};

dhs_status dhs_ref_locmeter_create(int32_t n_groups, int32_t k, int32_t lru_rows, int64_t positions, int32_t max_tracked,
                                   dhs_ref_locmeter **out)
{
    if (!out || n_groups < 1 || k < 1 || lru_rows < 1 || positions < 1 || max_tracked < 1) return DHS_ERR_INVALID_ARG;
    dhs_ref_locmeter *m = calloc(1, sizeof *m);
    if (!m) return DHS_ERR_NOMEM;
    m->ng = n_groups;
    m->k = k;
    m->B = lru_rows;
    m->nt = max_tracked;
    m->P = positions;
    m->t = calloc((size_t)max_tracked, sizeof *m->t);
    m->acc = calloc((size_t)n_groups, sizeof *m->acc);
    if (!m->t || !m->acc) {
        dhs_ref_locmeter_destroy(m);
        return DHS_ERR_NOMEM;
    }
    for (int32_t i = 0; i < max_tracked; i++) m->t[i].id = -1;
    *out = m;
    return DHS_OK;
}

static void sess_free(dhs_ref_locmeter *m, lm_sess *s)
{
    if (s->g)
        for (int32_t g = 0; g < m->ng; g++) {
            free(s->g[g].last);
            free(s->g[g].lastq);
            free(s->g[g].prev);
            free(s->g[g].next);
        }
    free(s->g);
    s->g = NULL;
    s->id = -1;
}

void dhs_ref_locmeter_destroy(dhs_ref_locmeter *m)
{
    if (!m) return;
    if (m->t)
        for (int32_t i = 0; i < m->nt; i++) sess_free(m, &m->t[i]);
    free(m->t);
    free(m->acc);
    free(m);
}

void dhs_ref_locmeter_forget(dhs_ref_locmeter *m, int32_t id)
{
    if (!m) return;
    for (int32_t i = 0; i < m->nt; i++)
        if (m->t[i].id == id) sess_free(m, &m->t[i]);
}

int32_t dhs_ref_locmeter_lru_rows(const dhs_ref_locmeter *m) { return m ? m->B : 0; }

static void lru_unlink(lm_state *s, int32_t r)
{
    if (s->prev[r] >= 0) s->next[s->prev[r]] = s->next[r];
    else s->head = s->next[r];
    if (s->next[r] >= 0) s->prev[s->next[r]] = s->prev[r];
    else s->tail = s->prev[r];
    s->prev[r] = -2;
    s->size--;
}

static void lru_push_front(lm_state *s, int32_t r)
{
    s->prev[r] = -1;
    s->next[r] = s->head;
    if (s->head >= 0) s->prev[s->head] = r;
    s->head = r;
    if (s->tail < 0) s->tail = r;
    s->size++;
}

dhs_status dhs_ref_locmeter_observe(dhs_ref_locmeter *m, int32_t id, uint64_t round, int32_t g, const int32_t *sel,
                                    int32_t K, int64_t visible)
{
    if (!m || !sel || g < 0 || g >= m->ng || id < 0 || K < 1) return DHS_ERR_INVALID_ARG;
    lm_sess *ts = NULL, *fr = NULL;
    for (int32_t i = 0; i < m->nt; i++) {
        if (m->t[i].id == id) ts = &m->t[i];
        else if (m->t[i].id < 0 && !fr) fr = &m->t[i];
    }
    if (!ts) {
        if (!fr) return DHS_OK; /* not tracked */
        fr->g = calloc((size_t)m->ng, sizeof *fr->g);
        if (!fr->g) return DHS_ERR_NOMEM;
        fr->id = id;
        ts = fr;
    }
    lm_state *s = &ts->g[g];
    if (!s->last) {
        s->last = calloc((size_t)m->P, sizeof *s->last);
        s->lastq = calloc((size_t)m->P, sizeof *s->lastq);
        s->prev = malloc(sizeof(int32_t) * (size_t)m->P);
        s->next = malloc(sizeof(int32_t) * (size_t)m->P);
        if (!s->last || !s->lastq || !s->prev || !s->next) {
            free(s->last);
            free(s->lastq);
            free(s->prev);
            free(s->next);
            memset(s, 0, sizeof *s);
            return DHS_ERR_NOMEM;
        }
        for (int64_t r = 0; r < m->P; r++) s->prev[r] = -2;
        s->head = s->tail = -1;
    }
    dhs_ref_loc_group *a = &m->acc[g];
    const uint32_t rnd = (uint32_t)round + 1;
    int full_prev = 0;
    for (int32_t j = 0; j < K; j++) {
        const int32_t *q = sel + (int64_t)j * m->k;
        int32_t valid = 0, same_round = 0, same_draft = 0;
        const uint32_t prevq = s->qc, curq = ++s->qc;
        for (int32_t e = 0; e < m->k; e++) {
            int32_t r = q[e];
            if (r < 0 || r >= m->P) continue;
            valid++;
            if (j == 0 && s->last_round && s->last[r] == s->last_round) same_round++;
            if (j > 0 && s->lastq[r] == prevq) same_draft++;
        }
        int full = valid == m->k;
        if (j == 0 && full && s->last_full && s->last_round + 1 == rnd) { /* the previous observation: round - 1 */
            a->pairs++;
            a->alpha += (double)same_round / (double)m->k;
            a->random += visible > 0 ? (double)m->k / (double)visible : 0;
        }
        if (j > 0 && full && full_prev) {
            a->draft_pairs++;
            a->draft += (double)same_draft / (double)m->k;
        }
        for (int32_t e = 0; e < m->k; e++) {
            int32_t r = q[e];
            if (r < 0 || r >= m->P) continue;
            if (j == 0) s->last[r] = rnd;
            s->lastq[r] = curq;
            a->accesses++;
            if (s->prev[r] != -2) {
                a->hits++;
                lru_unlink(s, r);
            } else if (s->size >= m->B) {
                lru_unlink(s, s->tail);
            }
            lru_push_front(s, r);
        }
        if (j == 0) s->last_full = full;
        full_prev = full;
    }
    s->last_round = rnd;
    return DHS_OK;
}

void dhs_ref_locmeter_get(const dhs_ref_locmeter *m, int32_t g, dhs_ref_loc_group *out)
{
    memset(out, 0, sizeof *out);
    if (!m || g < 0 || g >= m->ng) return;
    *out = m->acc[g];
    if (out->pairs) {
        out->alpha /= (double)out->pairs;
        out->random /= (double)out->pairs;
    }
    if (out->draft_pairs) out->draft /= (double)out->draft_pairs;
}
