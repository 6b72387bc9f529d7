"""TinyJit: run a function's kernels again without running its Python.

A training step builds the same graph every time: the same ops on the same shapes, scheduled into
the same kernels. Building and scheduling it in Python costs as much as running it, so
`@TinyJit` does it twice and then stops:

- call 1 runs the function as it is (kernels compile, optimizer state appears);
- call 2 runs it again and *captures* it: every kernel launched (and every random draw and arange),
  with the buffers it read and wrote;
- call 3 and after *replay* the capture: the same kernels on the same buffers, with the call's
  input tensors in place of the captured ones. No graph is built, nothing is scheduled.

What a replay can and cannot know, and so what the capture checks (a JitError, never a stale
answer):
- Tensors passed as arguments are inputs: their buffers are swapped in. A call whose tensors differ
  in shape, dtype or device from the capture's, or whose other arguments differ in value, is refused,
  naming the argument.
- State the function keeps (parameters, optimizer moments, the learning rate, BatchNorm's running
  statistics) must be updated with `assign`, which writes the tensor's own buffer in place: a replay
  writes it again. Every assign the call makes is realized before it returns, as a replay runs it.
  A tensor made inside the call that is still alive after it (state kept by rebinding a Python
  name) would not be updated by a replay, so the capture refuses it; so does a buffer of earlier
  state that the call dropped.
- State read from outside the arguments (a closure, a model's attribute) is read from the buffer
  the capture saw. Before each replay every tensor that held such a buffer at the capture must
  still hold it: one rebound since (`st["w"] = Tensor(...)`, or to an unrealized graph
  `w = w * 2`), or dropped, raises, naming it; an assign made between calls and not realized yet
  is realized first, into that buffer.
- Views as arguments: a reshape of a whole buffer is swapped in as it is; a strided view (a slice
  with an offset or steps, a transpose) or a constant is copied into a buffer of its own first,
  and the function gets the copy.
- `@TinyJit` on a method gives each instance its own capture.
- Data uploaded from Python inside the function (`Tensor(list)`) and values read back to Python
  (`.item()`, `.numpy()`) would be frozen at the capture: refused, naming the line.
- Random numbers are drawn again on every replay, from the stream's current counter, so a jitted
  step draws exactly what the eager one would.

What stays inherent to a tracing JIT: Python values read from outside the arguments (a global
float, a flag, the length of a list) are frozen at the capture, since a replay runs no Python.
Pass them as arguments (a changed value is refused) or keep them in tensors updated with assign.

The returned tensors are realized and detached; a replay returns new buffers each call, so a loss
kept from an earlier call keeps its value. The buffers that live only inside one call share memory
where their lifetimes do not overlap (plan_memory): `TinyJit.peak_bytes` reports what they take.
"""

from __future__ import annotations

import functools
import gc
import time
import types
import weakref
from dataclasses import dataclass, field
from typing import Any

from . import debug


class JitError(RuntimeError):
    pass


@dataclass
class Capture:
    """What one call ran, in order; buffers by weak reference, so that the ones the call let go of
    can be told from the ones something still holds."""

    # ("kernel", device, fn, kernel, [ref]) | ("random" | "iota", kernels, ref, n, dtype)
    # | ("check", fail, low ref, high, dtype, top ref)
    steps: list[tuple] = field(default_factory=list)
    made: dict[weakref.ref, tuple[int, type]] = field(default_factory=dict)  # allocated in the call: nbytes, class
    what: dict[weakref.ref, str] = field(default_factory=dict)  # what each of those holds, for errors
    uploads: dict[weakref.ref, str] = field(default_factory=dict)  # copied in from Python in the call: its line
    readback: str | None = None  # the line of the first value read back to Python
    assigns: list[weakref.ref] = field(default_factory=list)  # the in-place writes the call asked for
    rebound: list[weakref.ref] = field(default_factory=list)  # tensors an assign pointed at new values
    ops: int = 0  # GlobalCounters' sums over the kernels
    mem: int = 0


CAPTURING: list[Capture] = []  # the capture under way (realize.py, random.py and tensor.py report to it)


def note_kernel(device, fn, kernel, buffers: list, new: list, ops: int, nbytes: int) -> None:
    """A kernel ran on `buffers`; `new` are the (buffer, what it holds) it wrote that were allocated for it."""
    cap = CAPTURING[0]
    for b, what in new:
        cap.made[weakref.ref(b)] = (b.nbytes, type(b))
        cap.what[weakref.ref(b)] = f"{what}, written by {kernel.name}"
    cap.steps.append(("kernel", device, fn, kernel, [held(b) for b in buffers]))
    cap.ops += ops
    cap.mem += nbytes


def note_fixed(kind: str, buf, n: int, dtype=None) -> None:
    """A fixed kernel's output: `random` (n numbers of dtype) or `iota`."""
    cap = CAPTURING[0]
    cap.made[weakref.ref(buf)] = (buf.nbytes, type(buf))
    cap.what[weakref.ref(buf)] = f"{n} numbers from {kind}"
    cap.steps.append((kind, buf.kernels, held(buf), n, dtype))


def held(buf) -> weakref.ref:
    """A weak reference to buf, hashed now: a dead one cannot be hashed, and the plan looks them up."""
    ref = weakref.ref(buf)
    hash(ref)
    return ref


def note_upload(buf) -> None:
    CAPTURING[0].uploads[weakref.ref(buf)] = user_line()


def note_readback() -> None:
    cap = CAPTURING[0]
    cap.readback = cap.readback or user_line()


def note_check(fail, low_buf, top_buf, high: int, dtype) -> None:
    """A range check read these bounds (checks.py): a replay reads them again, right where the call did."""
    CAPTURING[0].steps.append(("check", fail, held(low_buf), high, dtype, held(top_buf)))


def user_line() -> str:
    site = debug.callsite()
    return "an unknown line" if site is None else f"{site[0]}:{site[1]}"


@dataclass
class Plan:
    """A capture made replayable: every buffer a slot of a table filled per call."""

    steps: list[tuple]  # ("kernel", device, fn, kernel, [slot]) | ("random"/"iota", kernels, slot, n, dtype)
    # | ("check", fail, low slot, high, dtype, top slot)
    fixed: list  # the table's entries that stay: persistent buffers and the plan's own intermediates
    inputs: dict[int, int]  # slot -> input index
    fresh: dict[int, tuple[int, type]]  # slot -> (nbytes, class): an output, new every call
    outputs: Any  # the return value's structure, tensors as (slot, shape tracker, base shape, dtype, device)
    kernels: int
    ops: int
    mem: int
    peak_bytes: int
    state_slots: list[int]  # the slots of earlier state (parameters, moments): written in place, never swapped
    state: list[tuple[int, list, str]] = field(default_factory=list)  # their holders (find_holders)


class TinyJit:
    """A decorator: `@TinyJit def step(x, y): ...` (see the module's docstring)."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0
        self.plan: Plan | None = None
        self.signature: list | None = None
        functools.update_wrapper(self, fn)

    @property
    def peak_bytes(self) -> int:
        """Bytes of the buffers that live only inside one call, after planning (0 before the capture)."""
        return self.plan.peak_bytes if self.plan else 0

    def __get__(self, obj, owner=None):
        """`@TinyJit` on a method (`__call__`, `forward`): each instance gets a TinyJit of its own, with
        its own capture, kept in the instance's __dict__ (it lives and dies with the instance)."""
        if obj is None:
            return self
        slot = f"_tinyjit_{getattr(self.fn, '__name__', 'fn')}"
        try:
            bound = obj.__dict__.get(slot)
            if bound is None:
                bound = obj.__dict__[slot] = TinyJit(types.MethodType(self.fn, obj))
        except AttributeError:
            raise JitError(f"TinyJit: {type(obj).__name__} has no __dict__ (__slots__) to keep the capture of its "
                           f"method {slot[9:]} in") from None
        return bound

    def __call__(self, *args, **kwargs):
        from .tensor import Tensor

        args, kwargs = swap_inputs(args, Tensor), swap_inputs(kwargs, Tensor)
        signature, tensors = describe(args, kwargs, Tensor)
        buffers = [t.lazydata.base.buffer for t in tensors]
        signature.append(("aliases", tuple(next(i for i, b in enumerate(buffers) if b is t) for t in buffers)))
        signature.append(("mode", (Tensor.training, grad_enabled())))
        if self.plan is not None:
            self.check(signature)
            check_state(self.plan, getattr(self.fn, "__name__", "the function"))
            return self.replay(buffers, Tensor)
        self.calls += 1
        if self.calls == 1:  # as a replay will: the returned tensors realized, with every assign the call made
            return self.run(args, kwargs, Tensor)[0]
        return self.capture(args, kwargs, signature, buffers, Tensor)

    def run(self, args, kwargs, Tensor) -> tuple[Any, Capture]:
        """Call the function under a capture, then realize what it returns and every assign it made and
        left pending (BatchNorm's running statistics, which nothing else reads): a replay runs them all."""
        cap = Capture()
        CAPTURING.append(cap)
        try:
            ret = self.fn(*args, **kwargs)
            outs = flatten_outputs(ret, Tensor, getattr(self.fn, "__name__", "the function"))
            pending = [Tensor._make(node) for node in (r() for r in cap.assigns)
                       if node is not None and node.buffer is None and node.target is not None]
            pending += [t for t in (r() for r in cap.rebound) if t is not None and t.lazydata.base.buffer is None]
            if outs or pending:
                Tensor.realize(*outs, *pending)
        finally:
            CAPTURING.pop()
        return ret, cap

    def check(self, signature: list) -> None:
        name = getattr(self.fn, "__name__", "the function")
        if len(signature) != len(self.signature):
            raise JitError(f"TinyJit({name}): called with {len(signature) - 2} arguments (tensors and values, "
                           f"counted inside lists), the capture had {len(self.signature) - 2}")
        for (path, now), (_, then) in zip(signature, self.signature, strict=True):
            if now != then:
                raise JitError(f"TinyJit({name}): {path} is {show(now)}, the capture had {show(then)}; a replay "
                               "runs the captured kernels, so every call needs the same shapes, dtypes, devices "
                               "and Python values (pass a number that changes as a Tensor)")

    def capture(self, args, kwargs, signature, buffers, Tensor):
        name = getattr(self.fn, "__name__", "the function")
        ret, cap = self.run(args, kwargs, Tensor)
        structure = freeze(ret, Tensor)
        result = thaw(structure, lambda slot: None, Tensor, live=True)  # detached tensors over this call's buffers
        del ret
        gc.collect()  # what the call dropped (its graph, with cycles) is gone before we ask what is alive
        self.plan = make_plan(cap, buffers, structure, name)
        self.plan.state = find_holders(self.plan, Tensor)
        self.signature = signature
        return result

    def replay(self, inputs: list, Tensor):
        from .realize import GlobalCounters, debug_level  # (realize.py imports this module)

        plan = self.plan
        start = time.perf_counter()
        table = list(plan.fixed)
        for slot, i in plan.inputs.items():
            table[slot] = inputs[i]
        for slot, (nbytes, cls) in plan.fresh.items():
            table[slot] = cls(nbytes)
        for step in plan.steps:
            if step[0] == "kernel":
                _, device, fn, kernel, slots = step
                device.launch(fn, kernel, [table[s] for s in slots])
            else:
                kind, kernels, slot, n, dtype, *top_slot = step
                buf = table[slot]
                if kind == "check":  # kernels is the check's error (checks.py)
                    low, top = int(buf.to_numpy(0, 1, dtype)[0]), int(table[top_slot[0]].to_numpy(0, 1, dtype)[0])
                    if low < 0 or top >= n:
                        raise kernels(low, top)
                    continue
                if kind == "random":
                    from .random import RandomState

                    state = RandomState
                    status = kernels.rand_uniform(dtype.code, buf.ptr(0, dtype), n, state.seed, state.counter)
                    state.counter = (state.counter + n) & 0xFFFFFFFFFFFFFFFF
                else:
                    status = kernels.iota(buf.address, n)
                if status != 0:
                    raise RuntimeError(f"TinyJit: the fixed kernel {kind} failed (status {status})")
        elapsed = time.perf_counter() - start
        GlobalCounters.kernel_count += plan.kernels
        GlobalCounters.global_ops += plan.ops
        GlobalCounters.global_mem += plan.mem
        GlobalCounters.time_sum += elapsed
        if debug_level() >= 1:
            print(f"jit: replayed {plan.kernels} kernels in {elapsed * 1e3:.2f} ms")
        return thaw(plan.outputs, lambda slot: table[slot], Tensor)


def whole(t) -> bool:
    """A tensor a replay can swap in: its values are one realized buffer, in order from its start."""
    return t.lazydata.base.buffer is not None and t.lazydata.st.contiguous


def swap_inputs(x, Tensor):
    """The call's arguments with each tensor made whole: an unrealized one is realized (in place, which
    changes nothing its caller sees), a strided view or a constant is copied into a buffer of its own and
    the copy is passed instead (so an assign to it inside the call does not reach the viewed tensor).
    Lists, tuples and dicts are opened; a container is rebuilt only when something in it changed."""
    if isinstance(x, Tensor):
        if not whole(x):
            x.realize()
        return x if whole(x) else x.contiguous().realize()
    if isinstance(x, (list, tuple)):
        items = [swap_inputs(v, Tensor) for v in x]
        if all(a is b for a, b in zip(items, x, strict=True)):
            return x
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    if isinstance(x, dict):
        items = {k: swap_inputs(v, Tensor) for k, v in x.items()}
        return x if all(items[k] is v for k, v in x.items()) else type(x)(items)
    return x


def find_holders(plan: Plan, Tensor) -> list[tuple[int, list, str]]:
    """For each buffer of earlier state the plan reads, the tensors that hold it now (weakly), and
    what it is: (slot, [ref], description). A one-time walk over the live objects, at the capture."""
    slots = {id(plan.fixed[s]): s for s in plan.state_slots}
    holders: dict[int, list] = {s: [] for s in plan.state_slots}
    what: dict[int, str] = {}
    for obj in gc.get_objects():
        if isinstance(obj, Tensor) and "lazydata" in obj.__dict__:
            base = obj.lazydata.base
            slot = slots.get(id(base.buffer)) if base.buffer is not None else None
            if slot is not None:
                holders[slot].append(weakref.ref(obj))
                what.setdefault(slot, f"a {base.dtype.name} tensor of shape {base.shape} made at {debug.where(base)}")
    return [(s, refs, what[s]) for s, refs in holders.items() if refs]


def check_state(plan: Plan, name: str) -> None:
    """Before a replay: every tensor that held state the capture read still holds that buffer. An
    assign made since and not realized yet (w.assign(w * 2) between calls) is realized now, into the
    buffer; a tensor rebound to another value (st["w"] = Tensor(...), or to a graph: w = w * 2) or
    dropped, leaving the buffer to the capture alone, would make the replay read stale values."""
    for slot, refs, what in plan.state:
        buf, live = plan.fixed[slot], 0
        for ref in refs:
            t = ref()
            if t is None:
                continue
            base = t.lazydata.base
            if base.buffer is None and base.target is not None and base.target.buffer is buf:
                t.realize()  # a pending assign writes this very buffer
                base = t.lazydata.base
            if base.buffer is not buf:
                raise JitError(f"TinyJit({name}): {what}, which the capture reads, was rebound since (to a new "
                               "tensor or an unrealized graph); a replay would read its old buffer. Update it with "
                               "assign, or pass it as an argument")
            live += 1
        if not live:
            raise JitError(f"TinyJit({name}): {what}, which the capture reads, is no longer held by anything but "
                           "the JIT (the name that held it was rebound or deleted); a replay would read its old "
                           "values. Update it with assign, or pass it as an argument")


def grad_enabled() -> bool:
    from .autograd import GradMode

    return GradMode.enabled


def describe(args, kwargs, Tensor) -> tuple[list, list]:
    """The call's signature, [(where, what)], and its tensors in order. A tensor is described by
    its shape, dtype and device; any other value by itself (lists, tuples and dicts are opened)."""
    signature, tensors = [], []

    def walk(x, path: str) -> None:
        if isinstance(x, Tensor):
            tensors.append(x)
            signature.append((path, ("tensor", x.shape, x.dtype.name, x.device)))
        elif isinstance(x, (list, tuple)):
            signature.append((path, (type(x).__name__, len(x))))
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        elif isinstance(x, dict):
            signature.append((path, ("dict", tuple(x))))
            for k, v in x.items():
                walk(v, f"{path}[{k!r}]")
        else:
            signature.append((path, ("value", x)))

    for i, a in enumerate(args):
        walk(a, f"argument {i}")
    for k, v in kwargs.items():
        walk(v, f"argument {k!r}")
    return signature, tensors


def show(what: tuple) -> str:
    if what[0] == "tensor":
        return f"a {what[2]} tensor of shape {what[1]} on {what[3]}"
    if what[0] == "value":
        return repr(what[1])
    if what[0] == "mode":
        return f"(training, grad enabled) = {what[1]}"
    return f"{what[0]} {what[1]}"


def flatten_outputs(ret, Tensor, name: str) -> list:
    outs = []

    def walk(x) -> None:
        if isinstance(x, Tensor):
            outs.append(x)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif x is not None:
            raise JitError(f"TinyJit({name}): returned a {type(x).__name__}, which a replay could not compute; "
                           "return tensors (in lists, tuples or dicts) or None")

    walk(ret)
    return outs


def freeze(ret, Tensor):
    """The return value with each tensor as (buffer, view, base shape, dtype, device)."""
    if isinstance(ret, Tensor):
        lb = ret.lazydata
        return ("tensor", lb.base.buffer, None if lb.is_base else lb.st, lb.base.shape, lb.dtype, lb.device)
    if isinstance(ret, (list, tuple)):
        return (type(ret), [freeze(v, Tensor) for v in ret])
    if isinstance(ret, dict):
        return (dict, {k: freeze(v, Tensor) for k, v in ret.items()})
    return None


def thaw(frozen, buffer_of, Tensor, live: bool = False):
    """Tensors again, over the buffers `buffer_of(slot)` gives (the frozen buffer itself when live)."""
    from .lazy import LazyBuffer

    if frozen is None:
        return None
    if frozen[0] == "tensor":
        _, ref, st, shape, dtype, device = frozen
        buf = ref if live else ref.buf if isinstance(ref, _Kept) else buffer_of(ref)
        base = LazyBuffer.from_buffer(buf, shape, dtype, device)
        return Tensor._make(base if st is None else base._view(st))
    kind, items = frozen
    if kind is dict:
        return {k: thaw(v, buffer_of, Tensor, live) for k, v in items.items()}
    return kind(thaw(v, buffer_of, Tensor, live) for v in items)


def make_plan(cap: Capture, inputs: list, structure, name: str) -> Plan:
    """The capture as slots. A buffer the call read is one of: an input (swapped in per call); one a
    kernel of the call made that is returned (new per call) or that died with the call (the plan's
    own, planned by lifetime); or one from before the call that is still alive (persistent state,
    written in place). Anything else makes a replay wrong, and raises."""
    if cap.readback is not None:
        raise JitError(f"TinyJit({name}): reads a value back to Python (.item(), .numpy()) at {cap.readback}; "
                       "a replay runs no Python, so that value and whatever it decided would be frozen. "
                       "Return the tensor and read it after the call")
    for r in cap.assigns:
        node = r()
        if node is not None and node.buffer is None and node.target is not None:
            raise JitError(f"TinyJit({name}): an assign made at {debug.where(node)} was not realized inside the "
                           "call; a replay runs only what the call ran. Realize the assigned tensor before returning")
    slot_of: dict[weakref.ref, int] = {}
    first, last = {}, {}
    steps = []
    for i, step in enumerate(cap.steps):
        refs = step[4] if step[0] == "kernel" else [step[2], step[5]] if step[0] == "check" else [step[2]]
        for r in refs:
            if r in cap.uploads:
                raise JitError(f"TinyJit({name}): uses data copied in from Python inside the call ({cap.uploads[r]}); "
                               "a replay would use the captured copy forever. Pass it as an argument, or keep it "
                               "in a tensor made outside and updated with assign")
            slot = slot_of.setdefault(r, len(slot_of))
            first.setdefault(slot, i)
            last[slot] = i
        if step[0] == "kernel":
            steps.append((*step[:4], [slot_of[r] for r in refs]))
        else:
            steps.append((step[0], step[1], slot_of[step[2]], step[3], step[4], *(slot_of[r] for r in refs[1:])))
    returned = set()
    collect_buffers(structure, returned)
    input_ids = {id(b): i for i, b in reversed(list(enumerate(inputs)))}
    fixed: list = [None] * len(slot_of)
    plan_inputs, fresh, temporary, state = {}, {}, {}, []
    for r, slot in slot_of.items():
        buf = r()
        if buf is not None and id(buf) in input_ids:
            plan_inputs[slot] = input_ids[id(buf)]
        elif r in cap.made and buf is not None and id(buf) in returned:
            fresh[slot] = cap.made[r]
        elif r in cap.made and buf is None:
            temporary[slot] = cap.made[r]
        elif r in cap.made:
            raise JitError(f"TinyJit({name}): a tensor made inside the call ({cap.what[r]}) is still held after "
                           "it and is not returned: state kept by rebinding a name (x = x + 1) instead of "
                           "x.assign(x + 1), or gradients not zeroed inside the step. A replay would not update it")
        elif buf is None:
            step = cap.steps[first[slot]]
            by = f" (first read by {step[3].name})" if step[0] == "kernel" else ""
            raise JitError(f"TinyJit({name}): the call dropped a buffer of earlier state that its kernels read{by} "
                           "(state replaced instead of updated with assign); a replay would read stale values")
        else:
            fixed[slot] = buf
            state.append(slot)
    peak = plan_memory(temporary, first, last, fixed)
    kernels = sum(s[0] == "kernel" for s in cap.steps)
    outputs = map_structure(structure, {id(r()): s for r, s in slot_of.items() if r() is not None})
    return Plan(steps, fixed, plan_inputs, fresh, outputs, kernels, cap.ops, cap.mem, peak, state)


def collect_buffers(frozen, out: set) -> None:
    if frozen is None:
        return
    if frozen[0] == "tensor":
        out.add(id(frozen[1]))
        return
    for v in (frozen[1].values() if frozen[0] is dict else frozen[1]):
        collect_buffers(v, out)


def map_structure(frozen, slots: dict):
    """The frozen return value with each buffer replaced by its slot (or kept, when no kernel of the
    call touched it: a returned input or parameter that nothing wrote)."""
    if frozen is None:
        return None
    if frozen[0] == "tensor":
        _, buf, *rest = frozen
        return ("tensor", slots.get(id(buf), _Kept(buf)), *rest)
    kind, items = frozen
    if kind is dict:
        return (kind, {k: map_structure(v, slots) for k, v in items.items()})
    return (kind, [map_structure(v, slots) for v in items])


class _Kept:
    """A returned buffer outside the plan's table."""

    def __init__(self, buf):
        self.buf = buf


def plan_memory(temporary: dict, first: dict, last: dict, fixed: list) -> int:
    """Give each buffer that lives only inside a call memory of its own or memory a finished one of
    the same size and class gave back (greedy, in the order the buffers appear); returns the bytes
    allocated. The steps run in order, so a buffer whose last use came before another's first can
    hand it over."""
    free: dict[tuple[int, type], list] = {}
    ending: list[tuple[int, int]] = sorted((last[s], s) for s in temporary)
    held: dict[int, Any] = {}
    total = 0
    for slot in sorted(temporary, key=lambda s: first[s]):
        while ending and ending[0][0] < first[slot]:
            _, done = ending.pop(0)
            if done in held:
                free.setdefault(temporary[done], []).append(held.pop(done))
        nbytes, cls = temporary[slot]
        pool = free.get((nbytes, cls))
        if pool:
            buf = pool.pop()
        else:
            buf = cls(nbytes)
            total += nbytes
        held[slot] = buf
        fixed[slot] = buf
    return total
