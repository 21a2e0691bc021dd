/* policy.c - replacement policies: exact LRU, CLOCK, FIFO, LFU.
 *
 * Each state is one flat block (state_bytes(B)) so the core allocates it
 * through its accounted allocator. All operations are O(1) except LFU
 * (O(log B)); victim() never scans the whole cache while an unprotected slot
 * exists near the policy's eviction end.
 */
#include <string.h>

#include "dhs_plan.h"
#include "core/policy.h"

/* ---------------------------------------------------------- LRU / FIFO
 * Doubly linked list over slots, head = most recent. LRU moves a touched
 * slot to the head; FIFO leaves it. Protected slots were touched (LRU) this
 * round, so the tail is unprotected unless all are; FIFO may meet protected
 * slots at the tail and walks past them (bounded by the protected count). */
typedef struct {
    int32_t B, head, tail;
    int32_t *prev, *next;
    uint8_t *in;
    /* FIFO scan cursor of the current epoch: the last victim and the slot
       after it toward the head; every slot between the tail and the victim
       was protected when the scan passed it (protection only grows within an
       epoch), so the next scan resumes there instead of at the tail */
    int32_t last, last_prev, last_next;
    uint32_t cur_epoch;
} list_st;

static size_t list_bytes(int32_t B)
{
    return sizeof(list_st) + (size_t)B * (2 * sizeof(int32_t) + 1) + 16;
}

static void list_init(void *p, int32_t B)
{
    list_st *s = p;
    s->B = B;
    s->head = s->tail = -1;
    s->last = s->last_prev = s->last_next = -1;
    s->cur_epoch = 0;
    s->prev = (int32_t *)(s + 1);
    s->next = s->prev + B;
    s->in = (uint8_t *)(s->next + B);
    memset(s->in, 0, (size_t)B);
}

static void list_unlink(list_st *s, int32_t q)
{
    if (s->prev[q] >= 0) s->next[s->prev[q]] = s->next[q]; else s->head = s->next[q];
    if (s->next[q] >= 0) s->prev[s->next[q]] = s->prev[q]; else s->tail = s->prev[q];
}

static void list_push_head(list_st *s, int32_t q)
{
    s->prev[q] = -1;
    s->next[q] = s->head;
    if (s->head >= 0) s->prev[s->head] = q; else s->tail = q;
    s->head = q;
}

static void list_insert(void *p, int32_t q, uint64_t key)
{
    (void)key;
    list_st *s = p;
    if (s->in[q]) list_unlink(s, q);
    s->in[q] = 1;
    list_push_head(s, q);
}

static void lru_touch(void *p, int32_t q, uint64_t key)
{
    (void)key;
    list_st *s = p;
    if (!s->in[q]) return;
    list_unlink(s, q);
    list_push_head(s, q);
}

static void fifo_touch(void *p, int32_t q, uint64_t key) { (void)p; (void)q; (void)key; }

static void list_remove(void *p, int32_t q)
{
    list_st *s = p;
    if (!s->in[q]) return;
    list_unlink(s, q);
    s->in[q] = 0;
}

static int32_t list_victim(void *p, const uint32_t *prot, uint32_t epoch)
{
    list_st *s = p;
    for (int32_t q = s->tail; q >= 0; q = s->prev[q])
        if (prot[q] != epoch) return q;
    return -1;
}

/* FIFO: hits do not move slots, so protected slots gather at the tail; the
   cursor makes a round's misses walk past them once instead of once per miss.
   The scan restarts at the last victim when it is still in place (victim()
   asked twice), else at the slot after it; a scan that finds nothing, or an
   epoch change, restarts at the tail. */
static int32_t fifo_victim(void *p, const uint32_t *prot, uint32_t epoch)
{
    list_st *s = p;
    int32_t start = s->tail;
    if (s->cur_epoch == epoch) {
        /* resume only where the scanned run is provably intact: the slot we
           restart from still sits right above its tail-side neighbour */
        if (s->last >= 0 && s->in[s->last] && s->prev[s->last] == s->last_prev && s->next[s->last] == s->last_next)
            start = s->last;
        else if (s->last_prev >= 0 && s->in[s->last_prev] && s->next[s->last_prev] == s->last_next)
            start = s->last_prev;
    }
    int32_t q = -1;
    for (int pass = 0; pass < 2; pass++) {
        for (q = start; q >= 0; q = s->prev[q])
            if (prot[q] != epoch) break;
        if (q >= 0 || start == s->tail) break;
        start = s->tail;
    }
    if (q < 0) {
        s->cur_epoch = 0;
        return -1;
    }
    s->cur_epoch = epoch;
    s->last = q;
    s->last_prev = s->prev[q];
    s->last_next = s->next[q];
    return q;
}

/* ---------------------------------------------------------- CLOCK */
typedef struct {
    int32_t B, hand;
    uint8_t *ref, *in;
} clock_st;

static size_t clock_bytes(int32_t B) { return sizeof(clock_st) + 2 * (size_t)B + 16; }

static void clock_init(void *p, int32_t B)
{
    clock_st *s = p;
    s->B = B;
    s->hand = 0;
    s->ref = (uint8_t *)(s + 1);
    s->in = s->ref + B;
    memset(s->ref, 0, 2 * (size_t)B);
}

static void clock_insert(void *p, int32_t q, uint64_t key)
{
    (void)key;
    clock_st *s = p;
    s->in[q] = 1;
    s->ref[q] = 1;
}

static void clock_touch(void *p, int32_t q, uint64_t key)
{
    (void)key;
    ((clock_st *)p)->ref[q] = 1;
}

static void clock_remove(void *p, int32_t q)
{
    clock_st *s = p;
    s->in[q] = 0;
    s->ref[q] = 0;
}

static int32_t clock_victim(void *p, const uint32_t *prot, uint32_t epoch)
{
    clock_st *s = p;
    /* two sweeps clear every reference bit; a third finding nothing means
       every occupied slot is protected */
    for (int64_t i = 0; i < 2 * (int64_t)s->B + 1; i++) {
        int32_t q = s->hand;
        s->hand = (s->hand + 1) % s->B;
        if (!s->in[q] || prot[q] == epoch) continue;
        if (s->ref[q]) { s->ref[q] = 0; continue; }
        return q;
    }
    return -1;
}

/* ---------------------------------------------------------- LFU
 * Min-heap on (frequency, last access). Protected entries met at the top are
 * set aside for the rest of the epoch (protection only grows within one) and
 * pushed back when the epoch changes or a call finds no victim: O(log B)
 * amortised per miss. Entries aside keep their frequency up to date. */
typedef struct {
    int32_t B, n, n_aside;
    uint32_t aside_epoch;
    int32_t *heap, *pos, *aside, *apos; /* apos[q]: index in aside or -1 */
    uint64_t *freq, *last;
} lfu_st;

static size_t lfu_bytes(int32_t B)
{
    return sizeof(lfu_st) + (size_t)B * (4 * sizeof(int32_t) + 2 * sizeof(uint64_t)) + 32;
}

static void lfu_init(void *p, int32_t B)
{
    lfu_st *s = p;
    s->B = B;
    s->n = 0;
    s->n_aside = 0;
    s->aside_epoch = 0;
    s->freq = (uint64_t *)(s + 1);
    s->last = s->freq + B;
    s->heap = (int32_t *)(s->last + B);
    s->pos = s->heap + B;
    s->aside = s->pos + B;
    s->apos = s->aside + B;
    for (int32_t i = 0; i < B; i++) {
        s->pos[i] = -1;
        s->apos[i] = -1;
    }
}

static int lfu_less(const lfu_st *s, int32_t a, int32_t b)
{
    if (s->freq[a] != s->freq[b]) return s->freq[a] < s->freq[b];
    return s->last[a] < s->last[b];
}

static void lfu_swap(lfu_st *s, int32_t i, int32_t j)
{
    int32_t a = s->heap[i], b = s->heap[j];
    s->heap[i] = b; s->pos[b] = i;
    s->heap[j] = a; s->pos[a] = j;
}

static void lfu_up(lfu_st *s, int32_t i)
{
    while (i > 0) {
        int32_t par = (i - 1) / 2;
        if (!lfu_less(s, s->heap[i], s->heap[par])) break;
        lfu_swap(s, i, par);
        i = par;
    }
}

static void lfu_down(lfu_st *s, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n && lfu_less(s, s->heap[l], s->heap[m])) m = l;
        if (r < s->n && lfu_less(s, s->heap[r], s->heap[m])) m = r;
        if (m == i) break;
        lfu_swap(s, i, m);
        i = m;
    }
}

static void lfu_push(lfu_st *s, int32_t q)
{
    s->heap[s->n] = q;
    s->pos[q] = s->n;
    s->n++;
    lfu_up(s, s->n - 1);
}

static void lfu_heap_remove(lfu_st *s, int32_t q)
{
    int32_t i = s->pos[q];
    if (i < 0) return;
    s->n--;
    if (i != s->n) {
        lfu_swap(s, i, s->n);
        lfu_down(s, i);
        lfu_up(s, i);
    }
    s->pos[q] = -1;
}

/* pushes back every entry set aside */
static void lfu_restore(lfu_st *s)
{
    for (int32_t i = 0; i < s->n_aside; i++) {
        int32_t q = s->aside[i];
        s->apos[q] = -1;
        lfu_push(s, q);
    }
    s->n_aside = 0;
}

static void lfu_remove(void *p, int32_t q)
{
    lfu_st *s = p;
    int32_t i = s->apos[q];
    if (i >= 0) { /* swap-remove from the aside set */
        int32_t last = s->aside[--s->n_aside];
        s->aside[i] = last;
        s->apos[last] = i;
        s->apos[q] = -1;
    }
    lfu_heap_remove(s, q);
}

static void lfu_insert(void *p, int32_t q, uint64_t key)
{
    lfu_st *s = p;
    lfu_remove(s, q);
    s->freq[q] = 1;
    s->last[q] = key;
    lfu_push(s, q);
}

static void lfu_touch(void *p, int32_t q, uint64_t key)
{
    lfu_st *s = p;
    s->freq[q]++;
    s->last[q] = key;
    if (s->pos[q] >= 0) lfu_down(s, s->pos[q]);
}

static int32_t lfu_victim(void *p, const uint32_t *prot, uint32_t epoch)
{
    lfu_st *s = p;
    if (s->aside_epoch != epoch) {
        lfu_restore(s);
        s->aside_epoch = epoch;
    }
    while (s->n > 0) {
        int32_t q = s->heap[0];
        if (prot[q] != epoch) return q;
        lfu_heap_remove(s, q);
        s->apos[q] = s->n_aside;
        s->aside[s->n_aside++] = q;
    }
    lfu_restore(s); /* no victim: forget, the next call looks at everything */
    s->aside_epoch = 0;
    return -1;
}

static const dhs_policy_ops ops_table[DHS_POLICY_COUNT_] = {
    [DHS_POLICY_LRU] = {"lru", list_bytes, list_init, list_insert, lru_touch, list_remove, list_victim, NULL},
    [DHS_POLICY_CLOCK] = {"clock", clock_bytes, clock_init, clock_insert, clock_touch, clock_remove, clock_victim, NULL},
    [DHS_POLICY_FIFO] = {"fifo", list_bytes, list_init, list_insert, fifo_touch, list_remove, fifo_victim, NULL},
    [DHS_POLICY_LFU] = {"lfu", lfu_bytes, lfu_init, lfu_insert, lfu_touch, lfu_remove, lfu_victim, NULL},
};

const dhs_policy_ops *dhs_policy_get(dhs_policy p)
{
    if ((int)p < 0 || p >= DHS_POLICY_COUNT_) return NULL;
    return &ops_table[p];
}

const char *dhs_policy_str(dhs_policy p)
{
    const dhs_policy_ops *o = dhs_policy_get(p);
    return o ? o->name : "unknown";
}

dhs_status dhs_policy_parse(const char *str, dhs_policy *out)
{
    if (!str || !out) return DHS_ERR_INVALID_ARG;
    for (int i = 0; i < DHS_POLICY_COUNT_; i++)
        if (!strcmp(str, ops_table[i].name)) { *out = (dhs_policy)i; return DHS_OK; }
    return DHS_ERR_INVALID_ARG;
}
