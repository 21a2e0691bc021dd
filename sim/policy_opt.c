/* policy_opt.c - offline Belady (OPT): evict the unprotected slot used
 * furthest in the future (largest key = next-use time from the simulator's
 * oracle). See policy_opt.h.
 *
 * State: a binary max-heap with lazy deletion. A slot touched or inserted
 * only records its key and joins the "new" list: O(1). victim(prot, epoch)
 * first moves new slots into the heap, or to the "held" list when they are
 * protected in `epoch`; when the epoch differs from the last call's, held
 * slots that are no longer protected re-enter the heap first. Heap entries
 * made stale by a later touch or remove are skipped when they surface and
 * dropped when the heap array fills (compaction, amortised O(1)). A protected
 * slot found at the top is held, so each is looked at once per round.
 * (The core's staging promotion calls victim() with its own promotion mark:
 * any epoch change, not only an increment, re-examines the held list.)
 *
 * Candidates whose key is DHS_OPT_KEY_NEVER (never used again) wait on a
 * stack instead of the heap: any of them is a best victim, in O(1).
 *
 * Invariant: every occupied slot is in exactly one of: the new list, the held
 * list, the never stack, or the heap with exactly one valid entry (version
 * equal to ver[q]).
 */
#include <string.h>

#include "sim/policy_opt.h"

typedef struct {
    uint64_t key;
    int32_t slot;
    uint32_t ver;
} opt_ent;

enum { OPT_EMPTY = 0, OPT_IN_HEAP = 1, OPT_NEW = 2, OPT_HELD = 3, OPT_NEVER = 4 };

typedef struct {
    int32_t B, nn, nh, nv;
    int64_t n, cap;      /* heap entries (valid and stale), capacity */
    uint32_t last_epoch; /* epoch whose held list is current */
    uint64_t *key;       /* [B] current key of a slot */
    uint32_t *ver;       /* [B] bumped on every change: older heap entries are stale */
    uint8_t *state;      /* [B] OPT_* */
    int32_t *nlist;      /* [B] slots touched / inserted since the last victim() */
    int32_t *hlist;      /* [B] slots held out of the heap: protected in last_epoch */
    int32_t *vlist;      /* [B] candidates never used again (key NEVER): any is a best victim */
    int32_t *lpos;       /* [B] index of a slot in its list */
    opt_ent *heap;       /* [cap] max-heap on (key, -slot) */
} opt_st;

static int64_t heap_cap(int32_t B) { return 2 * (int64_t)B + 64; }

static size_t opt_bytes(int32_t B)
{
    return sizeof(opt_st) + (size_t)B * (sizeof(uint64_t) + sizeof(uint32_t) + 1 + 4 * sizeof(int32_t)) +
           (size_t)heap_cap(B) * sizeof(opt_ent) + 64;
}

static void opt_init(void *p, int32_t B)
{
    opt_st *s = p;
    s->B = B;
    s->nn = s->nh = s->nv = 0;
    s->n = 0;
    s->cap = heap_cap(B);
    s->last_epoch = 0;
    s->heap = (opt_ent *)(s + 1);
    s->key = (uint64_t *)(s->heap + s->cap);
    s->ver = (uint32_t *)(s->key + B);
    s->nlist = (int32_t *)(s->ver + B);
    s->hlist = s->nlist + B;
    s->vlist = s->hlist + B;
    s->lpos = s->vlist + B;
    s->state = (uint8_t *)(s->lpos + B);
    memset(s->ver, 0, sizeof(uint32_t) * (size_t)B);
    memset(s->state, 0, (size_t)B);
}

/* a is evicted before b */
static int ent_before(const opt_ent *a, const opt_ent *b)
{
    if (a->key != b->key) return a->key > b->key;
    return a->slot < b->slot;
}

static void sift_up(opt_st *s, int64_t i)
{
    opt_ent e = s->heap[i];
    while (i > 0) {
        int64_t par = (i - 1) / 2;
        if (!ent_before(&e, &s->heap[par])) break;
        s->heap[i] = s->heap[par];
        i = par;
    }
    s->heap[i] = e;
}

static void sift_down(opt_st *s, int64_t i)
{
    opt_ent e = s->heap[i];
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m;
        if (l >= s->n) break;
        m = (r < s->n && ent_before(&s->heap[r], &s->heap[l])) ? r : l;
        if (!ent_before(&s->heap[m], &e)) break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    s->heap[i] = e;
}

static int ent_valid(const opt_st *s, const opt_ent *e)
{
    return s->state[e->slot] == OPT_IN_HEAP && s->ver[e->slot] == e->ver;
}

/* drops stale entries and re-heapifies: O(cap), amortised O(1) per push */
static void compact(opt_st *s)
{
    int64_t j = 0;
    for (int64_t i = 0; i < s->n; i++)
        if (ent_valid(s, &s->heap[i])) s->heap[j++] = s->heap[i];
    s->n = j;
    for (int64_t i = s->n / 2 - 1; i >= 0; i--) sift_down(s, i);
}

static void heap_push(opt_st *s, int32_t q)
{
    if (s->n == s->cap) compact(s);
    s->state[q] = OPT_IN_HEAP;
    s->heap[s->n] = (opt_ent){s->key[q], q, s->ver[q]};
    sift_up(s, s->n++);
}

static void heap_pop(opt_st *s)
{
    s->heap[0] = s->heap[--s->n];
    if (s->n > 0) sift_down(s, 0);
}

static int32_t *list_of(opt_st *s, uint8_t st, int32_t **n)
{
    if (st == OPT_NEW) { *n = &s->nn; return s->nlist; }
    if (st == OPT_HELD) { *n = &s->nh; return s->hlist; }
    *n = &s->nv;
    return s->vlist;
}

static void list_add(opt_st *s, int32_t q, uint8_t st)
{
    int32_t *n, *l = list_of(s, st, &n);
    s->state[q] = st;
    s->lpos[q] = *n;
    l[(*n)++] = q;
}

static void list_del(opt_st *s, int32_t q)
{
    int32_t *n, *l = list_of(s, s->state[q], &n);
    int32_t i = s->lpos[q], last = l[--*n];
    l[i] = last;
    s->lpos[last] = i;
}

static int in_list(const opt_st *s, int32_t q) { return s->state[q] >= OPT_NEW; }

/* a candidate: never-used slots on their stack, the others in the heap */
static void candidate(opt_st *s, int32_t q)
{
    if (s->key[q] == DHS_OPT_KEY_NEVER) list_add(s, q, OPT_NEVER);
    else heap_push(s, q);
}

static void opt_remove(void *p, int32_t q)
{
    opt_st *s = p;
    if (in_list(s, q)) list_del(s, q);
    s->state[q] = OPT_EMPTY;
    s->ver[q]++; /* a heap entry of q is stale now */
}

/* insert and touch only record the key; victim() places the slot */
static void opt_insert(void *p, int32_t q, uint64_t key)
{
    opt_st *s = p;
    if (s->state[q] != OPT_EMPTY) opt_remove(s, q);
    s->key[q] = key;
    s->ver[q]++;
    list_add(s, q, OPT_NEW);
}

static void opt_touch(void *p, int32_t q, uint64_t key)
{
    opt_st *s = p;
    if (s->state[q] == OPT_EMPTY) return;
    s->key[q] = key;
    s->ver[q]++;
    if (s->state[q] == OPT_NEVER) list_del(s, q);
    if (s->state[q] == OPT_IN_HEAP || s->state[q] == OPT_NEVER) list_add(s, q, OPT_NEW);
}

static int32_t opt_victim(void *p, const uint32_t *prot, uint32_t epoch)
{
    opt_st *s = p;
    if (s->last_epoch != epoch) {
        /* another round: held slots not protected in it are candidates again */
        for (int32_t i = 0; i < s->nh;) {
            int32_t q = s->hlist[i];
            if (prot[q] == epoch) { i++; continue; }
            list_del(s, q);
            candidate(s, q);
        }
        s->last_epoch = epoch;
    }
    /* slots changed since the last call: held if protected, else candidates */
    while (s->nn > 0) {
        int32_t q = s->nlist[--s->nn];
        if (prot[q] == epoch) list_add(s, q, OPT_HELD);
        else candidate(s, q);
    }
    while (s->nv > 0) {
        int32_t q = s->vlist[s->nv - 1];
        list_del(s, q);
        list_add(s, q, OPT_HELD); /* out until removed or the round changes */
        if (prot[q] != epoch) return q;
    }
    while (s->n > 0) {
        opt_ent top = s->heap[0];
        heap_pop(s);
        if (!ent_valid(s, &top)) continue;
        list_add(s, top.slot, OPT_HELD); /* out of the heap until removed or the round changes */
        if (prot[top.slot] != epoch) return top.slot;
    }
    return -1;
}

static const dhs_policy_ops opt_ops = {"opt", opt_bytes, opt_init, opt_insert, opt_touch, opt_remove, opt_victim, NULL};

const dhs_policy_ops *dhs_policy_opt(void) { return &opt_ops; }
