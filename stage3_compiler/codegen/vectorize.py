"""Vectorizing: an upcast kernel's lanes become vector values (a C compiler's vector types).

UPCAST (opts.py) lowers a kernel that computes several output entries a pass into one scalar
computation per entry, a "lane": a matmul's 8 x 16 register tile is 128 accumulators, each with
its own loads, multiply and add (lower.py). The C compiler may pack such lanes into vector
instructions by itself (gcc's SLP vectorizer) but often does not: a tile of one row and 64 columns
stayed 64 scalar accumulators. This pass does the packing itself, so the renderer writes a vector
type and the compiler has nothing left to discover.

Lanes side by side along the first upcast axis (the one that varies fastest) are grouped `width`
at a time. Each group's accumulators become one vector accumulator when every update of theirs is
the same computation in every lane, matched from the update back to the loads:
- the same UOp in every lane (a value the lanes share, like the row operand of a matmul tile) is a
  scalar broadcast to every lane;
- loads of one buffer at consecutive indices (lane k at the first lane's index + k) are one vector
  load;
- the same ALU op (ADD, MUL, NEG) over matched operands is one vector op, and a select (WHERE)
  by one condition all the lanes share picks one of two matched vectors; float32 comparisons are a
  mask, by which a WHERE selects lane by lane (relu's x <= 0).
The stores of a group write consecutive entries of one buffer and become one vector store when
their values match the same way (after the loop, the accumulators); a value that does not match
reads its lane out of the vector (GEP). What does not match stays scalar, as lowered.

A kernel that transposes (a matmul operand packed in panels: (rows / 8, cols, 8) from a row-major
(rows, cols)) reads side by side along its first upcast axis and writes side by side along its
second. Its stores then group along the second axis: the values are matched as vectors along the
first (one vector load a row), and each store's vector is built from one lane of each (VEC of
GEPs), which the C compiler turns into shuffles, a transpose in registers: whole vector stores, not
one scalar store an entry (benchmarks/results/stage3_rule_measurements.md).

A kernel whose reduce loop is unrolled (UNROLL) has a third kind of vector: across its terms
(`pack_terms`). Attention's backward (and FlashAttention's forward, softmax.softmax_block) takes
16 keys a pass, and each key's term is one scalar, computed from a score and an exp, that every lane
of the row broadcasts. Those 16 scalars are one computation key by key, so they are matched as the
lanes of one vector, as above, with a few more leaves: the keys' scores (nested sums, each already a
vector of partial sums) are added across (`sums_across`: 16 vectors into one vector of their 16 sums,
in the order each sum had), int64 loads and their comparisons (the causal mask from arange's buffer)
are vectors and masks too, and POW2 (exp's 2^n) has a vector formula in the renderer. The 16 exps are
then one vector exp, with the same bits lane by lane as the scalar code had. The forward's block max
and sum of exps, pairwise trees over those lanes, are folded as vectors too (`fold_lanes`). Key by key,
each exp ran alone in scalar code, which made attention's backward with the online pass far slower
(benchmarks/results/stage3_online_softmax.md, stage3_rule_measurements.md).

A vector UOp has `lanes` > 1: its value is that many entries of its dtype side by side.
"""

from __future__ import annotations

from ..dtype import dtypes
from ..graph.symbolic import Num
from ..ops import Ops
from .uops import UOp, UOps

# ops every vector type has as operators (RECIP: 1/x), exact as the scalar ones
VECTOR_ALU = (Ops.ADD, Ops.MUL, Ops.NEG, Ops.DIV, Ops.RECIP)
# float32 comparisons whose vector is a mask (a lane's int is -1 where true, 0 where false), which only
# a vector WHERE reads: the renderer selects by it bit by bit
MASK_COMPARES = (Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE)
MASK_LOGIC = (Ops.AND, Ops.OR, Ops.XOR)  # of two masks: a mask
# (the half types are float32 lanes in a kernel: a vector load widens their bits, a store rounds each lane)
VECTOR_DTYPES = (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16)
HALF_CASTS = ({dtypes.float32, dtypes.float16}, {dtypes.float32, dtypes.bfloat16}, {dtypes.float16}, {dtypes.bfloat16})
PACKED_ALU = (*VECTOR_ALU, Ops.POW2)  # and in a pack of unrolled terms (`pack_terms`): POW2, the renderer's own formula


def lane_width(fastest: int, dtype, width: int) -> int:
    """Lanes per vector: the renderer's width for float32 (half of it for float64), or half that for an
    axis only half as long (a panel's 8 rows), if it divides the fastest upcast axis; 0 when such
    lanes do not vectorize."""
    if dtype not in VECTOR_DTYPES:
        return 0
    w = width // 2 if dtype is dtypes.float64 else width
    if fastest < w:
        w //= 2
    return w if w >= 4 and fastest % w == 0 else 0


class Vectorizer:
    def __init__(self, uops: list[UOp], upcast: int, fastest: int, width: int, shared: set[int],
                 sums: list[tuple[UOp, list[UOp]]], second: int = 1, unrolled: bool = False,
                 folds: list[tuple[UOp, list[UOp], Ops]] | None = None):
        self.uops, self.upcast, self.fastest, self.width = uops, upcast, fastest, width  # width: float32 lanes
        self.second = second  # the lanes of the second upcast axis (transposed stores group along it)
        self.unrolled = unrolled  # the reduce loop takes several terms a pass (UNROLL): pack_terms may pack them
        self.shared = shared  # ACCs of no lane: a nested reduction's, an online softmax row's (lower.py)
        self.sums = sums  # nested sums written out as trees: (the result, its terms in order)
        self.folds = folds or []  # pairwise trees over a pack's terms: (the result, its leaves in order, the op)
        self.renamed: dict[int, UOp] = {}  # a replaced scalar's id -> the scalar that now holds its value
        self.matched: dict[tuple, UOp | None] = {}  # lane UOps' ids -> their vector or mask (or None)
        self.vector_of: dict[int, tuple[UOp, int]] = {}  # a replaced scalar's id -> (its vector, lane)
        self.replace_at: dict[int, UOp | None] = {}  # a replaced UOp's id -> what takes its place (None: nothing)
        self.count = 0
        self.acc_values: list[list[UOp]] = []  # each vector accumulator's update values, in order (pack_terms)
        self.sum_vectors: dict[int, UOp] = {}  # a nested sum's result -> the vector whose lanes it adds (vectorize_sum)
        self.packing = False  # matching a pack of unrolled terms (`pack_terms`): more leaves match

    def new(self, op: UOps, dtype, srcs: tuple = (), arg=None, lanes: int = 1) -> UOp:
        self.count += 1
        return UOp(op, dtype, tuple(srcs), arg, f"w{self.count}", lanes)

    def match(self, us: tuple[UOp, ...]) -> UOp | None:
        """The vector whose lane k is us[k], built from vector UOps; None if the lanes differ in kind."""
        key = (self.packing, *(id(u) for u in us))
        if key not in self.matched:
            self.matched[key] = found = self._match(us)
            if self.packing and found is not None and found.op is not UOps.VEC and len({id(u) for u in us}) == len(us):
                for k, u in enumerate(us):  # a pack's term, read as a scalar elsewhere (the block's max): its lane
                    self.vector_of.setdefault(id(u), (found, k))
        return self.matched[key]

    def _match(self, us: tuple[UOp, ...]) -> UOp | None:
        first, n = us[0], len(us)
        if all(u is first for u in us):
            return self.new(UOps.VEC, first.dtype, (first,), lanes=n) if first.lanes == 1 else None
        if all(id(u) in self.vector_of for u in us):  # the lanes of one vector, in order
            vec = self.vector_of[id(first)][0]
            if vec.lanes == n and all(self.vector_of[id(u)] == (vec, k) for k, u in enumerate(us)):
                return vec
        if any(u.op is not first.op or u.dtype is not first.dtype or u.lanes != 1 for u in us):
            return None
        if self.packing and all(id(u) in self.sum_vectors for u in us):
            return self.sums_across([self.sum_vectors[id(u)] for u in us])
        if first.op is UOps.LOAD:
            index, bound = first.arg
            if first.dtype not in VECTOR_DTYPES and not (self.packing and first.dtype is dtypes.int64):
                return None  # (a bool vector is a comparison's mask, not bytes: see `mask`)
            # a gated load (a padded view's piece, read only where it is valid) joins when every lane
            # has the one scalar gate: the vector is read whole or not at all
            gate = first.srcs[1:]
            if bound is not None or any(g.lanes != 1 for g in gate) or \
                    any(u.srcs[0] is not first.srcs[0] or u.arg[1] is not None or u.srcs[1:] != gate for u in us):
                return None
            if any((u.arg[0] - index) != Num(k) for k, u in enumerate(us)):
                return None  # not side by side: a gather, left to the scalar code
            return self.new(UOps.LOAD, first.dtype, first.srcs, first.arg, lanes=n)
        if first.op is UOps.ALU and first.arg is Ops.WHERE and all(u.arg is Ops.WHERE for u in us) \
                and first.srcs[0].lanes == 1 and all(u.srcs[0] is first.srcs[0] for u in us):
            # one condition for every lane (an embedding's row hit): C selects a whole vector by a scalar
            srcs = [self.match(tuple(u.srcs[i] for u in us)) for i in (1, 2)]
            if any(s is None for s in srcs):
                return None
            return self.new(UOps.ALU, first.dtype, (first.srcs[0], *srcs), Ops.WHERE, lanes=n)
        if first.op is UOps.ALU and first.arg is Ops.WHERE and all(u.arg is Ops.WHERE for u in us) \
                and first.dtype is dtypes.float32:
            # a condition of each lane's own (relu's x <= 0): a comparison's mask selects lane by lane
            lanes = [tuple(u.srcs[i] for u in us) for i in range(3)]
            srcs = [self.mask(lanes[0]), self.match(lanes[1]), self.match(lanes[2])]
            if any(s is None for s in srcs):
                return None
            return self.new(UOps.ALU, first.dtype, srcs, Ops.WHERE, lanes=n)
        if first.op is UOps.CAST and {first.dtype, first.srcs[0].dtype} in HALF_CASTS:
            # lanes rounded into a half type (a value computed in float32, or a half op's result: lower.py), or
            # half lanes read as float32 (the values they hold already: a half value is a float in a kernel)
            src = self.match(tuple(u.srcs[0] for u in us))
            return None if src is None else self.new(UOps.CAST, first.dtype, (src,), lanes=n)
        alu = PACKED_ALU if first.dtype is dtypes.float32 else VECTOR_ALU  # (POW2: a float32 formula of the renderer)
        if first.op is UOps.ALU and first.arg in alu and all(u.arg is first.arg for u in us):
            srcs = [self.match(tuple(u.srcs[i] for u in us)) for i in range(len(first.srcs))]
            if any(s is None for s in srcs):
                return None
            return self.new(UOps.ALU, first.dtype, srcs, first.arg, lanes=n)
        return None

    def mask(self, us: tuple[UOp, ...]) -> UOp | None:
        """The mask whose lane k is the bool us[k]: float32 comparisons of matched vectors, and the AND,
        OR and XOR of masks; None for any other bool (a loaded one is bytes, not a mask)."""
        key = ("mask", *(id(u) for u in us))
        if key not in self.matched:
            first, found = us[0], None
            if first.op is UOps.ALU and all(u.op is UOps.ALU and u.arg is first.arg for u in us):
                compared = (dtypes.float32, dtypes.int64) if self.packing else (dtypes.float32,)
                if first.arg in MASK_COMPARES and first.srcs[0].dtype in compared:
                    srcs = [self.match(tuple(u.srcs[i] for u in us)) for i in (0, 1)]
                elif first.arg in MASK_LOGIC:
                    srcs = [self.mask(tuple(u.srcs[i] for u in us)) for i in (0, 1)]
                else:
                    srcs = [None]
                if all(s is not None for s in srcs):
                    found = self.new(UOps.ALU, dtypes.bool, srcs, first.arg, lanes=len(us))
            self.matched[key] = found
        return self.matched[key]

    def groups(self, members: list[UOp]) -> list[tuple[UOp, ...]]:
        """Lane-ordered UOps of one role (one per lane), cut into groups of neighbours a vector wide
        (none where their dtype has no vector)."""
        w = lane_width(self.fastest, members[0].dtype, self.width) if members else 0
        return [tuple(members[i:i + w]) for i in range(0, len(members), w)] if w else []

    def run(self) -> list[UOp]:
        for total, terms in self.sums:
            self.vectorize_sum(total, terms)
        accs = [u for u in self.uops if u.op is UOps.ACC and id(u) not in self.shared]
        updates: dict[int, list[UOp]] = {}  # acc id -> its UPDATEs, in order
        for u in self.uops:
            if u.op is UOps.UPDATE:
                updates.setdefault(id(u.srcs[0]), []).append(u)
        per_lane = len(accs) // self.upcast  # the lowering's order: lane by lane, each lane's reductions
        for r in range(per_lane):
            for group in self.groups(accs[r::per_lane]):
                self.vectorize_accumulators(group, [updates.get(id(a), []) for a in group])
        stores: dict[int, list[UOp]] = {}  # buffer id -> its STOREs, lane by lane
        for u in self.uops:
            if u.op is UOps.STORE:
                stores.setdefault(id(u.srcs[0]), []).append(u)
        if self.unrolled:
            self.pack_terms()
            for root, leaves, op in self.folds:
                self.fold_lanes(root, leaves, op)
        for found in stores.values():
            if len(found) == self.upcast:
                done = [self.vectorize_store(group) for group in self.groups(found)]
                if not any(done) and self.second > 1:
                    self.vectorize_transposed_stores(found)
        return self.emit()

    def vectorize_accumulators(self, accs: tuple[UOp, ...], updates: list[list[UOp]]) -> None:
        first = accs[0]
        if first.arg != 0 or any(a.dtype is not first.dtype for a in accs):
            return  # (only sums: a max's update is a branch or a select, which C's vector types lack as operators)
        n = len(updates[0])
        # sums, and an online softmax's rescales (acc *= e^(m_old - m_new), one factor for every lane)
        if n == 0 or any(len(us) != n for us in updates) or \
                any(us[t].arg not in (Ops.REDUCE_ADD, Ops.REDUCE_MUL) or us[t].arg is not updates[0][t].arg
                    for us in updates for t in range(n)):
            return
        values = [self.match(tuple(us[t].srcs[1] for us in updates)) for t in range(n)]
        if any(v is None for v in values):
            return
        self.acc_values.append(values)
        vacc = self.new(UOps.ACC, first.dtype, arg=first.arg, lanes=len(accs))
        for k, a in enumerate(accs):
            self.vector_of[id(a)] = (vacc, k)
        self.replace_at[id(first)] = vacc
        for a in accs[1:]:
            self.replace_at[id(a)] = None
        for t in range(n):
            update = self.new(UOps.UPDATE, first.dtype, (vacc, values[t]), updates[0][t].arg, lanes=len(accs))
            self.replace_at[id(updates[0][t])] = update
            for us in updates[1:]:
                self.replace_at[id(us[t])] = None

    def vectorize_sum(self, total: UOp, terms: list[UOp]) -> None:
        """A nested sum's terms (attention's q . k over a head) `width` at a time as vectors, added
        together, then the lanes of the one vector left added pairwise: one vector load of each
        operand and one multiply where the scalar tree had a load and a multiply a term."""
        w = lane_width(len(terms), total.dtype, self.width)
        if w == 0:
            return
        vectors = [self.match(tuple(terms[i:i + w])) for i in range(0, len(terms), w)]
        if any(v is None or v.op is UOps.VEC for v in vectors):
            return  # (a broadcast scalar: the terms were one value, not a row of them)
        while len(vectors) > 1:
            vectors = [self.new(UOps.ALU, total.dtype, tuple(vectors[i:i + 2]), Ops.ADD, lanes=w)
                       if i + 1 < len(vectors) else vectors[i] for i in range(0, len(vectors), 2)]
        # The lanes' pairwise tree, (l0 + l1) + (l2 + l3)..., a level at a time: the even lanes plus the odd
        # ones, a vector half as wide, until two are left: a few vector adds in the scalar tree's order (the
        # same bits), where taking each lane out and adding it costs an extract and an add a lane; attention
        # with the online pass has six such sums a pair of positions (benchmarks/results/stage3_online_softmax.md).
        summed = self.halving(vectors[0], lambda a, b, lanes: self.new(UOps.ALU, total.dtype, (a, b), Ops.ADD,
                                                                        lanes=lanes))
        self.replace_at[id(total)] = summed
        self.renamed[id(total)] = summed
        self.sum_vectors[id(total)] = self.sum_vectors[id(summed)] = vectors[0]

    def halving(self, v: UOp, fold) -> UOp:
        """The lanes of v folded pairwise, (l0 . l1) . (l2 . l3)...: a level at a time, the even lanes with
        the odd ones, a vector half as wide (`fold(a, b, lanes)` makes the op), until the last pair's
        scalars. The scalar tree's pairs in its order: the same bits."""
        n, dtype = v.lanes, v.dtype
        while n > 2:
            halves = [self.new(UOps.SHUFFLE, dtype, (v,), tuple(range(k, n, 2)), lanes=n // 2) for k in (0, 1)]
            v, n = fold(*halves, n // 2), n // 2
        lanes = [self.new(UOps.GEP, dtype, (v,), k) for k in range(n)]
        return fold(*lanes, 1) if n == 2 else lanes[0]

    def sums_across(self, vectors: list[UOp]) -> UOp | None:
        """One vector whose lane k is the sum of the lanes of vectors[k] (m vectors of n lanes, m a multiple
        of n), added in vectorize_sum's order (the same bits): a level at a time, the even lanes of two
        neighbours plus their odd lanes, so that each vector's partial sums sit side by side, half as many
        each level; then the m / n vectors of n sums side by side. A block of 16 attention scores over a
        head of 32: 15 shuffled adds, where each score took 4 of its own."""
        m, n, dtype = len(vectors), vectors[0].lanes, vectors[0].dtype
        if m % n or m & (m - 1) or n < 2 or any(v.lanes != n or v.dtype is not dtype for v in vectors):
            return None
        width = n  # lanes a sum still spans
        while width > 1:
            pairs = zip(vectors[::2], vectors[1::2], strict=True)
            vectors = [self.new(UOps.ALU, dtype, tuple(self.new(UOps.SHUFFLE, dtype, (a, b), tuple(range(k, 2 * n, 2)),
                                                              lanes=n) for k in (0, 1)), Ops.ADD, lanes=n)
                       for a, b in pairs]
            width //= 2
        while len(vectors) > 1:
            lanes = 2 * vectors[0].lanes
            vectors = [self.new(UOps.SHUFFLE, dtype, (a, b), tuple(range(lanes)), lanes=lanes)
                       for a, b in zip(vectors[::2], vectors[1::2], strict=True)]
        return vectors[0]

    def pack_terms(self) -> None:
        """An unrolled reduce loop's terms, packed across: where a vector accumulator's updates each read
        one scalar broadcast to every lane (attention's backward: ds_j, the same for the head's 32 dims),
        and those scalars, `width` neighbouring terms of them, are one computation term by term, that
        computation runs once on a vector of terms (its exp: one vector exp for 16 keys) and each update
        broadcasts its lane. The leaves the terms differ by must be vectors already: loads side by side,
        nested sums (their lanes added across: `sums_across`), lanes of a vector in order."""
        done: set[int] = set()
        for values in self.acc_values:
            found = [b for b in map(broadcast, values) if b is not None]
            for start in range(0, len(found) - self.width + 1, self.width):
                chunk = found[start:start + self.width]
                if any(b is None or id(b) in done for b in chunk) or len({id(b.srcs[0]) for b in chunk}) == 1:
                    continue
                self.packing = True
                packed = self.match(tuple(b.srcs[0] for b in chunk))
                self.packing = False
                if packed is None or packed.lanes != self.width:
                    continue
                for k, b in enumerate(chunk):
                    self.vector_of.setdefault(id(b.srcs[0]), (packed, k))  # a scalar read of it reads its lane
                    b.srcs = (self.new(UOps.GEP, b.dtype, (packed,), k),)
                    done.add(id(b))

    def fold_lanes(self, root: UOp, leaves: list[UOp], op: Ops) -> None:
        """A pairwise tree over the lanes of one packed vector (an online softmax's block of keys: their
        max, the sum of their exps; softmax.softmax_block) folded as vectors: the even lanes with
        the odd ones, a vector half as wide a level, the scalar tree's pairs in its order (the same
        bits). ADD adds; MAX is the tree's `b < a ? a : b`, a mask and a select lane by lane."""
        if not leaves or any(id(u) not in self.vector_of for u in leaves):
            return
        vec, dtype = self.vector_of[id(leaves[0])][0], root.dtype
        n = vec.lanes
        if n != len(leaves) or n & (n - 1) or n < 2 or \
                any(self.vector_of[id(u)] != (vec, k) for k, u in enumerate(leaves)):
            return

        def fold(a: UOp, b: UOp, lanes: int) -> UOp:
            if op is Ops.ADD:
                return self.new(UOps.ALU, dtype, (a, b), Ops.ADD, lanes=lanes)
            below = self.new(UOps.ALU, dtypes.bool, (b, a), Ops.CMPLT, lanes=lanes)
            return self.new(UOps.ALU, dtype, (below, a, b), Ops.WHERE, lanes=lanes)
        folded = self.halving(vec, fold)
        self.replace_at[id(root)] = folded
        self.renamed[id(root)] = folded

    def vectorize_store(self, stores: tuple[UOp, ...]) -> bool:
        if not side_by_side(stores):
            return False
        value = self.match(tuple(s.srcs[1] for s in stores))
        if value is None:
            return False
        self.replace_stores(stores, value)
        return True

    def replace_stores(self, stores: tuple[UOp, ...], value: UOp) -> None:
        first = stores[0]
        self.replace_at[id(first)] = self.new(UOps.STORE, first.dtype, (first.srcs[0], value), first.arg,
                                              lanes=len(stores))
        for s in stores[1:]:
            self.replace_at[id(s)] = None

    def vectorize_transposed_stores(self, stores: list[UOp]) -> None:
        """Stores side by side along the second upcast axis (the module docstring's transposing kernel):
        stores[i + fastest * j] is lane i of the first axis and j of the second (then the other axes)."""
        f, n = self.fastest, self.second
        w = lane_width(n, stores[0].dtype, self.width)
        if w != n:
            return
        across = lane_width(f, stores[0].dtype, self.width)  # the values' vectors, along the first axis
        if not across:
            return
        for block in range(0, len(stores), f * n):
            rows = [[stores[block + i + f * j] for i in range(f)] for j in range(n)]
            vectors = [[self.match(tuple(s.srcs[1] for s in row[i:i + across])) for i in range(0, f, across)]
                       for row in rows]
            if any(v is None for row in vectors for v in row):
                return  # (a lane's scalar may read an accumulator that is now a vector: left to emit's GEPs)
            for i in range(f):
                group = tuple(row[i] for row in rows)
                if not side_by_side(group):
                    return
                lanes = [self.new(UOps.GEP, s.dtype, (vectors[j][i // across],), i % across)
                         for j, s in enumerate(group)]
                self.replace_stores(group, self.new(UOps.VEC, group[0].dtype, lanes, lanes=n))

    def emit(self) -> list[UOp]:
        """The kernel's UOps with the vectors in: each vector UOp placed just before the first UOp that
        needs it (its scalar operands before it), every scalar no longer read dropped."""
        out: list[UOp] = []
        placed: set[int] = set()
        lane_reads: dict[int, UOp] = {}  # replaced scalar id -> the GEP that reads its lane

        def resolve(s: UOp) -> UOp:  # a read of a lane now held in a vector reads it out of the vector
            s = self.renamed.get(id(s), s)
            if id(s) in self.vector_of:
                if id(s) not in lane_reads:
                    vec, k = self.vector_of[id(s)]
                    lane_reads[id(s)] = self.new(UOps.GEP, s.dtype, (vec,), k)
                s = lane_reads[id(s)]
            return s

        def place(u: UOp) -> None:
            if id(u) in placed:
                return
            placed.add(id(u))
            u.srcs = tuple(map(resolve, u.srcs))
            for s in u.srcs:
                place(s)
            out.append(u)

        for u in self.uops:
            if id(u) in self.replace_at:
                new = self.replace_at[id(u)]
                if new is not None:
                    place(new)
                continue
            place(u)
        return dead_code_removed(out)


def broadcast(v: UOp) -> UOp | None:
    """The broadcast scalar (a VEC of one) a vector product reads, if it reads one."""
    if v.op is not UOps.ALU or v.arg is not Ops.MUL:
        return None
    return next((s for s in v.srcs if s.op is UOps.VEC and len(s.srcs) == 1 and s.srcs[0].lanes == 1), None)


def side_by_side(stores: tuple[UOp, ...]) -> bool:
    """Do the stores write one dtype at consecutive indices (store k at the first's index + k)?"""
    first = stores[0]
    return all(s.dtype is first.dtype and (s.arg - first.arg) == Num(k) for k, s in enumerate(stores))


KEPT = (UOps.GLOBAL, UOps.SPECIAL, UOps.RANGE, UOps.ENDRANGE, UOps.IF, UOps.ENDIF, UOps.UPDATE, UOps.STORE)


def dead_code_removed(uops: list[UOp]) -> list[UOp]:
    """The UOps something kept reads (stores, updates, loops), in order."""
    live: set[int] = set()
    for u in reversed(uops):
        if u.op in KEPT or id(u) in live:
            live.add(id(u))
            live.update(id(s) for s in u.srcs)
    return [u for u in uops if id(u) in live]


def vectorize(uops: list[UOp], upcast: int, fastest: int, width: int, shared: set[int] | None = None,
              sums: list[tuple[UOp, list[UOp]]] | None = None, second: int = 1, unrolled: bool = False,
              folds: list[tuple[UOp, list[UOp], Ops]] | None = None) -> list[UOp]:
    """The kernel's UOps with its lanes packed into vectors of `width` float32s (module docstring);
    `fastest`, `second`: the lanes of the first and second upcast axes; `shared`: the ids of ACCs no
    lane owns; `unrolled`: the reduce loop takes several terms a pass (pack_terms). The UOps as they
    were where lanes do not group (no upcast, a SPLIT's partials)."""
    if (upcast == 1 and not sums) or any(u.op is UOps.ACCS for u in uops):
        return uops
    return Vectorizer(uops, upcast, fastest, width, shared or set(), sums or [], second, unrolled, folds).run()
