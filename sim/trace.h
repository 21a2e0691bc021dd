/*
 * trace.h - the dhisparse selection trace: a versioned, little-endian binary
 * file holding what a sparse-attention model's indexers selected, round by
 * round, plus request arrivals and completions. Byte layout: docs/TRACE.md.
 *
 * A trace is a header (architecture: groups = index producers with their k,
 * payload sources with row_bytes / m / group; declared request count; largest
 * spec width K_max; optional name and meta text) followed by records:
 *   START(req, prefix)   request `req` arrives with `prefix` imported positions
 *   ROUND(items)         one target forward pass: per request in it, n_r, K_r,
 *                        A_r and per group the K_r x k ordered selections
 *   END(req)             request `req` completes
 *   TRAILER(totals)      last record; lets readers detect truncation
 *
 * Semantics checked by writer and reader alike (DESIGN.md §1, §5):
 *   - request ids are 0 .. n_requests-1; a request starts once, ends at most
 *     once, and appears in rounds only between its START and END, at most once
 *     per round;
 *   - the first round of a request has n_r = prefix; each later one has
 *     n_r = previous n_r + A_r + 1 (A_r accepted proposals, 0 <= A_r < K_r);
 *   - query j of a request sits at position n_r + j; for a group whose rows
 *     hold m positions, it may select rows 0 .. floor((n_r + j + 1) / m) - 1
 *     (complete rows covering positions <= n_r + j) or -1 (padding). Rows are
 *     stored exactly as the top-k produced them (order and -1 kept); the format
 *     does not require distinct rows (`dhs trace info` counts duplicates).
 *
 * Writer example (e.g. the reference model, one group, no speculation):
 *
 *   dhs_trace_header h = {0};
 *   h.n_groups = 1; h.k[0] = 2048;
 *   h.n_sources = 1; h.sources[0] = (dhs_trace_source){576, 1, 0};
 *   h.n_requests = 2; h.k_max = 1;
 *   snprintf(h.name, sizeof h.name, "refmodel");
 *   char err[256];
 *   dhs_trace_writer *w;
 *   if (dhs_trace_writer_open("run.dtr", &h, &w, err, sizeof err)) { puts(err); ... }
 *   dhs_trace_write_start(w, 0, 1000);          // request 0: 1000 prefill positions
 *   const int32_t *sel0[1] = { rows };           // rows: [K=1][k=2048] int32, -1 = pad
 *   dhs_trace_item it = { .req = 0, .n_queries = 1, .n_r = 1000, .accepted = 0, .sel = sel0 };
 *   dhs_trace_write_round(w, 1, &it);            // next round of req 0 has n_r = 1001
 *   dhs_trace_write_end(w, 0);
 *   dhs_trace_writer_close(w);                   // writes the trailer
 *
 * Reader example:
 *
 *   dhs_trace_reader *r;
 *   if (dhs_trace_reader_open("run.dtr", 0, &r, err, sizeof err)) { puts(err); ... }
 *   const dhs_trace_header *h = dhs_trace_reader_header(r);
 *   dhs_trace_event ev;
 *   dhs_trace_status st;
 *   while ((st = dhs_trace_next(r, &ev)) == DHS_TRACE_OK) {
 *       if (ev.kind == DHS_TRACE_EV_ROUND)
 *           for (int32_t i = 0; i < ev.n_items; i++)
 *               use(ev.items[i].sel[0]);       // [K][k[0]] rows, valid until next call
 *   }
 *   if (st != DHS_TRACE_EOF) fprintf(stderr, "%s\n", dhs_trace_reader_error(r));
 *   dhs_trace_reader_close(r);
 *
 * Errors: every function returns a dhs_trace_status; a message with the byte
 * offset and record is available from *_error(). Nothing here prints, exits
 * or aborts on bad input. Handles are not thread-safe.
 */
#ifndef DHS_SIM_TRACE_H
#define DHS_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "dhs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DHS_TRACE_MAGIC "DHSTRACE"     /* 8 bytes, no NUL in the file */
#define DHS_TRACE_VERSION 1u
#define DHS_TRACE_MAX_GROUPS 128
#define DHS_TRACE_MAX_SOURCES 128
#define DHS_TRACE_MAX_K 65536          /* largest k per group */
#define DHS_TRACE_MAX_QUERIES 256      /* largest k_max (queries per request per round) */
#define DHS_TRACE_MAX_REQUESTS (1 << 20)
#define DHS_TRACE_MAX_M 65536          /* largest positions per row */
#define DHS_TRACE_MAX_POSITIONS ((int64_t)1 << 40)
#define DHS_TRACE_NAME_MAX 255         /* bytes, excluding the NUL */
#define DHS_TRACE_META_MAX 4095

/* header flags */
#define DHS_TRACE_F_SORTED 1u /* every query's rows ascending, padding last (informational) */

/* Stable numbering: append only. */
typedef enum dhs_trace_status {
    DHS_TRACE_OK = 0,
    DHS_TRACE_EOF = 1,               /* clean end: the trailer was read and matched */
    DHS_TRACE_ERR_IO = -1,           /* open/read/write/seek failed (errno text in the message) */
    DHS_TRACE_ERR_NOMEM = -2,
    DHS_TRACE_ERR_BAD_MAGIC = -3,    /* not a dhisparse trace */
    DHS_TRACE_ERR_BAD_VERSION = -4,  /* a trace of another format version */
    DHS_TRACE_ERR_TRUNCATED = -5,    /* file ends inside the header or a record, or before the trailer */
    DHS_TRACE_ERR_CORRUPT = -6,      /* checksum mismatch, impossible size or count, unknown record,
                                        totals differ from the trailer, bytes after the trailer */
    DHS_TRACE_ERR_SEQUENCE = -7,     /* lifecycle broken: round of a request not started / ended,
                                        started twice, n_r not following, round index skipped */
    DHS_TRACE_ERR_ROW = -8,          /* a selected row outside the query's visible rows */
    DHS_TRACE_ERR_INVALID_ARG = -9,  /* writer: bad header, NULL pointer, bad count */
    DHS_TRACE_ERR_STATE = -10,       /* writer: use after an I/O error */
    DHS_TRACE_STATUS_LAST_ = -10
} dhs_trace_status;

const char *dhs_trace_status_str(dhs_trace_status s);

/* ---------------------------------------------------------------- header */
typedef struct dhs_trace_source {
    uint32_t row_bytes; /* d_KV, > 0 */
    uint32_t m;         /* token positions per row, >= 1; equal for all sources of a group */
    int32_t group;      /* producer whose selections this source serves */
} dhs_trace_source;

typedef struct dhs_trace_header {
    uint32_t version;                        /* reader: the file's; writer: ignored */
    int32_t n_groups;                        /* index producers, 1..DHS_TRACE_MAX_GROUPS */
    int32_t k[DHS_TRACE_MAX_GROUPS];         /* selection length per group, 1..DHS_TRACE_MAX_K */
    int32_t n_sources;                       /* >= n_groups: every group has >= 1 source */
    dhs_trace_source sources[DHS_TRACE_MAX_SOURCES];
    int32_t n_requests;                      /* request ids are 0 .. n_requests-1 */
    int32_t k_max;                           /* largest K_r, 1..DHS_TRACE_MAX_QUERIES */
    uint32_t flags;                          /* DHS_TRACE_F_* */
    char name[DHS_TRACE_NAME_MAX + 1];       /* NUL-terminated, may be empty */
    char meta[DHS_TRACE_META_MAX + 1];       /* free text (the generator writes its parameters as JSON) */
} dhs_trace_header;

/* DHS_TRACE_OK or DHS_TRACE_ERR_INVALID_ARG with the reason in err. */
dhs_trace_status dhs_trace_header_validate(const dhs_trace_header *h, char *err, size_t err_len);
/* m of group g (m of its sources), 0 if g is out of range or has no source. */
uint32_t dhs_trace_group_m(const dhs_trace_header *h, int32_t g);
/* Header for an architecture: groups and sources copied from `a`, k for every
   group, DHS_TRACE_OK or ERR_INVALID_ARG. name may be NULL. */
dhs_trace_status dhs_trace_header_from_arch(dhs_trace_header *h, const dhs_arch *a, int32_t k,
                                            int32_t k_max, int32_t n_requests, const char *name);
/* Architecture of a trace: its groups and sources, one consumer per source
   (OWN for a group's first source, FOLLOW for the others); index_key_bytes 0. */
void dhs_trace_header_to_arch(const dhs_trace_header *h, dhs_arch *a);

/* ---------------------------------------------------------------- records */
typedef struct dhs_trace_item {
    uint32_t req;               /* request id */
    int32_t n_queries;          /* K_r, 1..k_max */
    int64_t n_r;                /* committed positions before the round; query j at n_r + j */
    int32_t accepted;           /* A_r, 0..K_r-1: the request's next n_r is n_r + A_r + 1 */
    const int32_t *const *sel;  /* [n_groups] pointers, sel[g]: [n_queries][k[g]] rows, -1 = padding */
} dhs_trace_item;

typedef struct dhs_trace_totals {
    uint64_t rounds;  /* ROUND records */
    uint64_t items;   /* request-rounds */
    uint64_t queries; /* sum of K_r over items */
    uint64_t entries; /* selection int32s, padding included: sum over items and groups of K_r * k[g] */
    uint64_t starts, ends;
} dhs_trace_totals;

/* ---------------------------------------------------------------- writer */
typedef struct dhs_trace_writer dhs_trace_writer;

/* Creates (truncates) `path` and writes the header. On error *out is NULL,
   nothing stays open, and err (may be NULL) holds the reason. */
dhs_trace_status dhs_trace_writer_open(const char *path, const dhs_trace_header *h,
                                       dhs_trace_writer **out, char *err, size_t err_len);
/* Request `req` arrives with `prefix` imported positions (0 <= prefix < 2^40). */
dhs_trace_status dhs_trace_write_start(dhs_trace_writer *w, uint32_t req, int64_t prefix);
/* One round: n_items requests (0 allowed), each started, not ended, at most
   once, with n_r as the lifecycle requires and every row visible. Everything
   is validated before a byte is written: on ERR_INVALID_ARG / SEQUENCE / ROW
   nothing is written and the writer stays usable. */
dhs_trace_status dhs_trace_write_round(dhs_trace_writer *w, int32_t n_items, const dhs_trace_item *items);
/* Request `req` completes (it must have started and not ended). */
dhs_trace_status dhs_trace_write_end(dhs_trace_writer *w, uint32_t req);
/* Writes the trailer (unless an I/O error happened before), flushes, closes
   and frees w (always, also on error). NULL is a no-op returning OK. */
dhs_trace_status dhs_trace_writer_close(dhs_trace_writer *w);
/* Message of the last error ("" if none). */
const char *dhs_trace_writer_error(const dhs_trace_writer *w);
const dhs_trace_totals *dhs_trace_writer_totals(const dhs_trace_writer *w);
/* Bytes written so far. */
uint64_t dhs_trace_writer_bytes(const dhs_trace_writer *w);

/* ---------------------------------------------------------------- reader */
typedef struct dhs_trace_reader dhs_trace_reader;

/* reader flags */
#define DHS_TRACE_READ_NO_ROW_CHECK 1u /* skip the visibility check of rows (checksums and
                                          lifecycle are still checked) */

typedef enum dhs_trace_event_kind {
    DHS_TRACE_EV_START = 1,
    DHS_TRACE_EV_ROUND = 2,
    DHS_TRACE_EV_END = 3
} dhs_trace_event_kind;

typedef struct dhs_trace_event {
    dhs_trace_event_kind kind;
    uint32_t req;                /* START, END */
    int64_t prefix;              /* START: imported positions */
    uint64_t round;              /* ROUND: 0, 1, 2, ... */
    int32_t n_items;             /* ROUND */
    const dhs_trace_item *items; /* ROUND: [n_items]; items and rows valid until the next call */
} dhs_trace_event;

/* Opens `path` and reads and validates the header (magic, version, sizes,
   checksum). On error *out is NULL and err (may be NULL) holds the reason. */
dhs_trace_status dhs_trace_reader_open(const char *path, unsigned flags, dhs_trace_reader **out,
                                       char *err, size_t err_len);
const dhs_trace_header *dhs_trace_reader_header(const dhs_trace_reader *r);
/* Next event: DHS_TRACE_OK with *ev filled, DHS_TRACE_EOF after a matching
   trailer and nothing after it, or an error (sticky: later calls repeat it).
   A file that ends before its trailer gives DHS_TRACE_ERR_TRUNCATED. */
dhs_trace_status dhs_trace_next(dhs_trace_reader *r, dhs_trace_event *ev);
/* Back to the first record (all state reset; for two-pass consumers such as
   the OPT oracle). ERR_IO when the file is not seekable. */
dhs_trace_status dhs_trace_reader_rewind(dhs_trace_reader *r);
/* Totals of the records read so far (equal to the trailer's after EOF). */
const dhs_trace_totals *dhs_trace_reader_totals(const dhs_trace_reader *r);
/* Bytes consumed so far (header included). */
uint64_t dhs_trace_reader_offset(const dhs_trace_reader *r);
const char *dhs_trace_reader_error(const dhs_trace_reader *r);
void dhs_trace_reader_close(dhs_trace_reader *r); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
