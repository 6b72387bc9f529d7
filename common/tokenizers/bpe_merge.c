/* The BPE training merge loop: pick the most frequent adjacent pair, merge it everywhere, repeat.
 *
 * Input is the training text already cut into words (regex chunks) and counted: word w is
 * tokens[start[w] .. start[w+1]) (byte ids 0..255) and occurs count[w] times. Merge m makes the
 * new token 256 + m from the pair (a, b) with the largest total count, ties going to the smallest
 * (a, b); it is written to merges[2m], merges[2m+1].
 *
 * Speed comes from never recounting: a hash table holds every pair's count and the list of words
 * it occurs in, so a merge touches only the words that hold its pair, and a max-heap ordered by
 * (count desc, pair asc) finds the next pair. Heap entries are lazy: a count only ever drops,
 * except for the pairs that contain the new token, which are pushed afresh after each merge; an
 * entry whose stored count is above the pair's real count is pushed again with the real count,
 * and one below it is a stale duplicate and is dropped. A word is rewritten by subtracting all
 * its pairs, merging in place left to right, and adding its pairs back, which gets overlapping
 * runs such as "aaa" right without special cases.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t key;    /* (a << 32) | b */
    int64_t count;   /* summed over words, weighted by word counts */
    int32_t *words;  /* words the pair has occurred in (may hold stale and repeated entries) */
    int32_t n_words, cap_words;
    int32_t stamp;   /* the merge step that last queued this pair for a push */
} Pair;

typedef struct {
    int64_t count;
    uint64_t key;
} Entry;

typedef struct {
    Pair *pairs;
    int64_t n_pairs, cap_pairs;
    int64_t *slots;  /* open addressing: index into pairs, or -1 */
    int64_t n_slots; /* a power of two */
    Entry *heap;
    int64_t n_heap, cap_heap;
} Table;

static uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

static uint64_t mix(uint64_t x) { /* splitmix64's finalizer: spreads nearby keys over the table */
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static int grow(void **data, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return 0;
    int64_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*data, (size_t)cap2 * size);
    if (!p) return -1;
    *data = p;
    *cap = cap2;
    return 0;
}

static int rehash(Table *t, int64_t n_slots) {
    int64_t *slots = malloc((size_t)n_slots * sizeof *slots);
    if (!slots) return -1;
    memset(slots, 0xff, (size_t)n_slots * sizeof *slots); /* all -1 */
    for (int64_t i = 0; i < t->n_pairs; i++) {
        uint64_t h = mix(t->pairs[i].key) & (uint64_t)(n_slots - 1);
        while (slots[h] >= 0) h = (h + 1) & (uint64_t)(n_slots - 1);
        slots[h] = i;
    }
    free(t->slots);
    t->slots = slots;
    t->n_slots = n_slots;
    return 0;
}

/* The pair with this key, created with count 0 if new; NULL when out of memory. */
static Pair *lookup(Table *t, uint64_t key) {
    uint64_t mask = (uint64_t)(t->n_slots - 1);
    uint64_t h = mix(key) & mask;
    for (; t->slots[h] >= 0; h = (h + 1) & mask)
        if (t->pairs[t->slots[h]].key == key) return &t->pairs[t->slots[h]];
    if (2 * (t->n_pairs + 1) > t->n_slots) { /* keep the load under 1/2 */
        if (rehash(t, 2 * t->n_slots)) return NULL;
        return lookup(t, key);
    }
    if (grow((void **)&t->pairs, &t->cap_pairs, t->n_pairs + 1, sizeof(Pair))) return NULL;
    Pair *p = &t->pairs[t->n_pairs];
    memset(p, 0, sizeof *p);
    p->key = key;
    p->stamp = -1;
    t->slots[h] = t->n_pairs++;
    return p;
}

static int add_word(Pair *p, int32_t w) {
    if (p->n_words && p->words[p->n_words - 1] == w) return 0;
    int64_t cap = p->cap_words;
    if (grow((void **)&p->words, &cap, p->n_words + 1, sizeof(int32_t))) return -1;
    p->cap_words = (int32_t)cap;
    p->words[p->n_words++] = w;
    return 0;
}

static int before(Entry x, Entry y) { /* x comes out of the heap first */
    return x.count > y.count || (x.count == y.count && x.key < y.key);
}

static int push(Table *t, int64_t count, uint64_t key) {
    if (grow((void **)&t->heap, &t->cap_heap, t->n_heap + 1, sizeof(Entry))) return -1;
    Entry e = {count, key};
    int64_t i = t->n_heap++;
    while (i > 0 && before(e, t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = e;
    return 0;
}

static Entry pop(Table *t) {
    Entry top = t->heap[0], last = t->heap[--t->n_heap];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= t->n_heap) break;
        if (c + 1 < t->n_heap && before(t->heap[c + 1], t->heap[c])) c++;
        if (!before(t->heap[c], last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (t->n_heap) t->heap[i] = last;
    return top;
}

/* Add delta * (each adjacent pair of word w); with a new token, queue its pairs for a push. */
static int count_pairs(Table *t, const int32_t *tok, int32_t len, int64_t delta, int32_t w, int32_t new_tok,
                       int32_t stamp, int64_t **queue, int64_t *n_queue, int64_t *cap_queue) {
    for (int32_t i = 0; i + 1 < len; i++) {
        Pair *p = lookup(t, pair_key(tok[i], tok[i + 1]));
        if (!p) return -1;
        p->count += delta;
        if (delta > 0 && (tok[i] == new_tok || tok[i + 1] == new_tok)) {
            if (add_word(p, w)) return -1;
            if (p->stamp != stamp) {
                p->stamp = stamp;
                if (grow((void **)queue, cap_queue, *n_queue + 1, sizeof(int64_t))) return -1;
                (*queue)[(*n_queue)++] = p - t->pairs; /* an index: lookup() may move the array */
            }
        }
    }
    return 0;
}

static void free_table(Table *t) {
    for (int64_t i = 0; i < t->n_pairs; i++) free(t->pairs[i].words);
    free(t->pairs);
    free(t->slots);
    free(t->heap);
}

/* merges: (n_merges, 2) int32, out. tokens: (start[n_words],) int32 byte ids, rewritten in place.
 * start: (n_words + 1,) int64 offsets. count: (n_words,) int64 occurrences of each word.
 * Returns the number of merges made (fewer than n_merges when no pair is left), or -1 when out of memory. */
int64_t bpe_train(int32_t *merges, int64_t n_merges, int32_t *tokens, const int64_t *start, const int64_t *count,
                  int64_t n_words) {
    Table t = {0};
    int32_t *len = malloc((size_t)(n_words ? n_words : 1) * sizeof *len);   /* current length of each word */
    int32_t *seen = malloc((size_t)(n_words ? n_words : 1) * sizeof *seen);  /* last step that rewrote it */
    int64_t *queue = NULL; /* pairs holding the new token, to push after a merge */
    int64_t n_queue = 0, cap_queue = 0, done = -1;
    if (!len || !seen || rehash(&t, 1 << 12)) goto out;
    for (int64_t w = 0; w < n_words; w++) {
        len[w] = (int32_t)(start[w + 1] - start[w]);
        seen[w] = -1;
        for (int32_t i = 0; i + 1 < len[w]; i++) {
            Pair *p = lookup(&t, pair_key(tokens[start[w] + i], tokens[start[w] + i + 1]));
            if (!p || add_word(p, (int32_t)w)) goto out;
            p->count += count[w];
        }
    }
    for (int64_t i = 0; i < t.n_pairs; i++)
        if (push(&t, t.pairs[i].count, t.pairs[i].key)) goto out;

    int64_t m = 0;
    while (m < n_merges && t.n_heap > 0) {
        Entry e = pop(&t);
        Pair *best = lookup(&t, e.key);
        if (!best) goto out;
        if (best->count != e.count) { /* stale: push the real count if it dropped, else a fresher entry exists */
            if (best->count > 0 && best->count < e.count && push(&t, best->count, e.key)) goto out;
            continue;
        }
        if (best->count <= 0) break;
        int32_t a = (int32_t)(e.key >> 32), b = (int32_t)(e.key & 0xffffffffu), new_tok = (int32_t)(256 + m);
        merges[2 * m] = a;
        merges[2 * m + 1] = b;
        n_queue = 0;
        /* lookup() may move the pairs array, so hold the word list itself, not the Pair. */
        int32_t *words = best->words, n_best_words = best->n_words;
        best->words = NULL;
        best->n_words = best->cap_words = 0;
        for (int32_t k = 0; k < n_best_words; k++) {
            int32_t w = words[k];
            int32_t *tok = tokens + start[w];
            if (seen[w] == m) continue;
            seen[w] = (int32_t)m;
            int found = 0;
            for (int32_t i = 0; i + 1 < len[w] && !found; i++) found = tok[i] == a && tok[i + 1] == b;
            if (!found) continue; /* a stale entry: an earlier merge took the pair out of this word */
            if (count_pairs(&t, tok, len[w], -count[w], w, new_tok, (int32_t)m, &queue, &n_queue, &cap_queue)) {
                free(words);
                goto out;
            }
            int32_t j = 0;
            for (int32_t i = 0; i < len[w]; i++) {
                if (i + 1 < len[w] && tok[i] == a && tok[i + 1] == b) {
                    tok[j++] = new_tok;
                    i++;
                } else {
                    tok[j++] = tok[i];
                }
            }
            len[w] = j;
            if (count_pairs(&t, tok, len[w], count[w], w, new_tok, (int32_t)m, &queue, &n_queue, &cap_queue)) {
                free(words);
                goto out;
            }
        }
        free(words);
        for (int64_t q = 0; q < n_queue; q++)
            if (t.pairs[queue[q]].count > 0 && push(&t, t.pairs[queue[q]].count, t.pairs[queue[q]].key)) goto out;
        m++;
    }
    done = m;
out:
    free(queue);
    free(len);
    free(seen);
    free_table(&t);
    return done;
}
