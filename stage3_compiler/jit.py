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
- A bound `Variable` passed as an argument (`start_pos=v.bind(17)`) is the one value that may change:
  the kernels that take it (a loop over `start_pos+1` cache rows) run with the call's value. A kernel
  whose Variable was not passed (bound outside the call) would replay a frozen value: refused at the
  capture, as is a returned tensor whose shape is symbolic (its size would be the capture's).
- State the function keeps (parameters, optimizer moments, the learning rate, BatchNorm's running
  statistics) must be updated with `assign`, which writes the tensor's own buffer in place: a replay
  writes it again. Every assign the call makes is realized before it returns, as a replay runs it.
  A tensor made inside the call and still held after it (the gradients a step leaves on the
  parameters when it zeroes them first, as tinygrad's examples do) keeps its buffer: every replay
  writes it again, so the tensor shows each call's values (a name rebound between calls, p.grad =
  None, is not bound again). State kept by rebinding a name instead (x = x + 1, or gradients that
  accumulate because nothing zeroes them inside the step) is refused: the capture sees a name that
  held a tensor the call read now hold one the call made, and names it. So is a buffer of earlier
  state that the call dropped.
- State read from outside the arguments (a closure, a model's attribute) is read from the buffer
  the capture saw. Before each replay every tensor that held such a buffer at the capture must
  still hold it: one rebound since (`st["w"] = Tensor(...)`, or to an unrealized graph
  `w = w * 2`), or dropped, raises, naming it; an assign made between calls and not realized yet
  is realized first, into that buffer. A tensor that was an unrealized graph over such a buffer
  when the call read it (the call computed its graph inside a kernel) must still be that graph.
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
import types
import weakref
from typing import Any

from .autograd import GradMode
from .engine import capture
from .engine.capture import Capture, JitError, KernelStep
from .engine.replay import Kept, Plan, make_plan, run_plan
from .graph.lazy import LazyBuffer
from .graph.shapetracker import is_symbolic
from .graph.symbolic import Variable
from .settings import where
from .tensor import Tensor, live_tensors

# Tools told of each plan a TinyJit makes, as `watcher(name, plan)` (viz/: VIZ=1 times its replays' kernels)
JIT_WATCHERS: list = []


class TinyJit:
    """A decorator: `@TinyJit def step(x, y): ...` (see the module's docstring)."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0
        self.plan: Plan | None = None
        self.first_bindings: list = []  # where the first call left the tensors it made (bindings_of_made)
        self.first_inputs: list[weakref.ref] = []  # the first call's argument buffers
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
        args, kwargs = swap_inputs(args), swap_inputs(kwargs)
        signature, tensors, values = describe(args, kwargs)
        buffers = [t.lazydata.base.buffer for t in tensors]
        signature.append(("aliases", tuple(next(i for i, b in enumerate(buffers) if b is t) for t in buffers)))
        signature.append(("mode", (Tensor.training, grad_enabled())))
        if self.plan is not None:
            self.check(signature)
            check_state(self.plan, getattr(self.fn, "__name__", "the function"))
            return self.replay(buffers, values)
        self.calls += 1
        if self.calls == 1:  # as a replay will: the returned tensors realized, with every assign the call made
            ret, cap = self.run(args, kwargs)
            self.first_bindings = bindings_of_made(cap)
            self.first_inputs = [weakref.ref(b) for b in buffers]
            return ret
        return self.capture(args, kwargs, signature, buffers, values)

    def run(self, args, kwargs) -> tuple[Any, Capture]:
        """Call the function under a capture, then realize what it returns and every assign it made and
        left pending (BatchNorm's running statistics, which nothing else reads): a replay runs them all."""
        cap = capture.start()
        try:
            ret = own_symbolic_views(self.fn(*args, **kwargs))
            outs = flatten_outputs(ret, getattr(self.fn, "__name__", "the function"))
            pending = [Tensor._make(node) for node in (r() for r in cap.assigns)
                       if node is not None and node.buffer is None and node.target is not None]
            pending += [t for t in (r() for r in cap.rebound) if t is not None and t.lazydata.base.buffer is None]
            if outs or pending:
                Tensor.realize(*outs, *pending)
        finally:
            capture.stop()
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

    def capture(self, args, kwargs, signature, buffers, values):
        name = getattr(self.fn, "__name__", "the function")
        ret, cap = self.run(args, kwargs)
        check_variables(cap, ret, values, name)
        structure = freeze(ret)
        result = thaw(structure, lambda slot: None, live=True)  # detached tensors over this call's buffers
        del ret
        gc.collect()  # what the call dropped (its graph, with cycles) is gone before we ask what is alive
        self.plan = make_plan(cap, buffers, structure, name)
        check_rebinding(self.plan, self.first_bindings, name)
        check_carried_inputs(self.plan, self.first_inputs, name)
        self.first_bindings, self.first_inputs = [], []
        self.plan.state = find_holders(self.plan)
        self.signature = signature
        for watcher in JIT_WATCHERS:
            watcher(name, self.plan)
        return result

    def replay(self, inputs: list, values: dict[str, int]):
        table = run_plan(self.plan, inputs, values)
        return thaw(self.plan.outputs, lambda slot: table[slot])


def whole(t) -> bool:
    """A tensor a replay can swap in: its values are one realized buffer, in order from its start."""
    return t.lazydata.base.buffer is not None and t.lazydata.st.contiguous


def map_tensors(x, fn):
    """x with fn applied to every tensor in it: lists, tuples (named ones too) and dicts are opened, and a
    container is rebuilt only when something in it changed."""
    if isinstance(x, Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)):
        items = [map_tensors(v, fn) for v in x]
        if all(a is b for a, b in zip(items, x, strict=True)):
            return x
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    if isinstance(x, dict):
        items = {k: map_tensors(v, fn) for k, v in x.items()}
        return x if all(items[k] is v for k, v in x.items()) else type(x)(items)
    return x


def swap_inputs(x):
    """The call's arguments with each tensor made whole: an unrealized one is realized (in place, which
    changes nothing its caller sees), a strided view or a constant is copied into a buffer of its own and
    the copy is passed instead (so an assign to it inside the call does not reach the viewed tensor)."""
    def make_whole(t: Tensor) -> Tensor:
        if not whole(t):
            t.realize()
        return t if whole(t) else t.contiguous().realize()
    return map_tensors(x, make_whole)


def own_symbolic_views(x):
    """The return value with each tensor that views its buffer through a Variable (x[:, n-1] of an
    input, n bound) copied into a buffer of its own: a kernel that takes n, where a returned view
    would keep the capture's offset."""
    return map_tensors(x, lambda t: t.contiguous() if not t.lazydata.is_base and t.lazydata.st.variables else t)


def bindings(tensors: list) -> list[tuple[Any, Any, weakref.ref]]:
    """Where each tensor is bound now: (the dict, list or closure cell holding it, the key there, a
    weak reference to the tensor's buffer). An object's attribute is an entry of its __dict__. One
    look through the referrers of all of them at once."""
    want = {id(t) for t in tensors}
    out = []
    for holder in gc.get_referrers(*tensors):
        if isinstance(holder, dict):
            pairs = holder.items()
        elif isinstance(holder, list) and holder is not tensors:
            pairs = enumerate(holder)
        elif isinstance(holder, types.CellType):
            pairs = [(None, holder.cell_contents)]
        elif isinstance(holder, (types.FrameType, type)) or not hasattr(type(holder), "__dict__"):
            continue
        else:  # an object whose attributes Python keeps inline (3.11+): the dict names the place
            try:
                holder = vars(holder)
            except TypeError:
                continue
            pairs = holder.items()
        out += [(holder, key, weakref.ref(value.lazydata.base.buffer)) for key, value in pairs if id(value) in want]
    return out


def value_at(holder, key):
    """What a place found by `bindings` holds now."""
    if isinstance(holder, dict):
        return holder.get(key)
    if isinstance(holder, list):
        return holder[key] if key < len(holder) else None
    try:
        return holder.cell_contents
    except ValueError:  # an empty cell
        return None


def bindings_of_made(cap: Capture) -> list:
    """After the first call: where the tensors holding a buffer that call made are bound."""
    gc.collect()  # what the call dropped (its graph, with cycles) is gone before we ask what is alive
    made = {id(r()) for r in cap.made if r() is not None}
    holding = [t for t in list(live_tensors) if id(t.lazydata.base.buffer) in made]
    return bindings(holding) if holding else []


def check_rebinding(plan: Plan, before: list, name: str) -> None:
    """A place (an attribute, a dict entry, a list item, a closure variable) that held, after the first
    call, a tensor that call made and this one read must still hold that tensor's buffer: if it holds
    another tensor, the state is kept by rebinding (x = x + 1, or gradients accumulated because
    nothing zeroes them in the step), and a replay would read the old buffer every time."""
    read = {id(plan.fixed[s]) for s in plan.state_slots}
    for holder, key, ref in before:
        old = ref()
        if old is None or id(old) not in read:
            continue
        now = value_at(holder, key)
        if not isinstance(now, Tensor) or now.lazydata.base.buffer is not old:
            label = "a closure variable" if isinstance(holder, types.CellType) else f"[{key!r}]"
            raise JitError(f"TinyJit({name}): {label} held a tensor this call read and now holds another: state "
                           "kept by rebinding a name (x = x + 1) instead of x.assign(x + 1), or gradients "
                           "accumulated because they are not zeroed inside the step. A replay would read the "
                           "old tensor every time")


def check_carried_inputs(plan: Plan, first_inputs: list, name: str) -> None:
    """The capture must not read an argument of the first call that this call did not pass: it reached
    this call through something kept from the last one (a gradient that accumulates across calls,
    never realized, or a graph built in one call and read in the next), and a replay would read that
    first argument forever."""
    firsts = {id(r()): i for i, r in enumerate(first_inputs) if r() is not None}
    for slot in plan.state_slots:
        i = firsts.get(id(plan.fixed[slot]))
        if i is not None:
            raise JitError(f"TinyJit({name}): reads the first call's tensor argument {i} although this call did "
                           "not pass it: something kept from one call to the next still computes from it (a "
                           "gradient accumulated because it is not zeroed inside the step, or a graph built in a "
                           "call and read in the next). A replay would read that first argument forever")


def find_holders(plan: Plan) -> list[tuple[int, list, str]]:
    """For each buffer of earlier state the plan reads, the tensors that hold it now (weakly), and
    what it is: (slot, [(ref, node)], description). A tensor holds a buffer when it is that buffer, or
    when it is an unrealized graph that reads it (node: that graph, which it must keep). A one-time
    look at every live tensor, at the capture."""
    slots = {id(plan.fixed[s]): s for s in plan.state_slots}
    holders: dict[int, list] = {s: [] for s in plan.state_slots}
    what: dict[int, str] = {}
    for obj in list(live_tensors):
        base = obj.lazydata.base
        if base.buffer is not None:
            reads, node = [base.buffer], None
        else:
            reads, node = buffers_read(base), obj.lazydata
        for buf in reads:
            slot = slots.get(id(buf))
            if slot is not None:
                holders[slot].append((weakref.ref(obj), node))
                what.setdefault(slot, f"a {base.dtype.name} tensor of shape {base.shape} made at {where(base)}")
    return [(s, refs, what[s]) for s, refs in holders.items() if refs]


def buffers_read(node: LazyBuffer) -> list:
    """The realized buffers an unrealized graph reads."""
    seen, stack, out = set(), [node], []
    while stack:
        n = stack.pop().base
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.buffer is not None:
            out.append(n.buffer)
        else:
            stack.extend(n.srcs)
    return out


def check_state(plan: Plan, name: str) -> None:
    """Before a replay: every tensor that held state the capture read still holds that buffer. An
    assign made since and not realized yet (w.assign(w * 2) between calls) is realized now, into the
    buffer; a tensor rebound to another value (st["w"] = Tensor(...), or to a graph: w = w * 2) or
    dropped, leaving the buffer to the capture alone, would make the replay read stale values."""
    for slot, refs, what in plan.state:
        buf, live = plan.fixed[slot], 0
        for ref, node in refs:
            t = ref()
            if t is None:
                continue
            if node is not None:  # an unrealized graph over the buffer when the call read it
                if t.lazydata is not node:
                    raise JitError(f"TinyJit({name}): {what}, an unrealized graph over a buffer the capture "
                                   "reads, was rebound since; a replay would compute the old graph. Update it "
                                   "with assign, realize it before the first call, or pass it as an argument")
                live += 1
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


def check_variables(cap: Capture, ret, values: dict[str, int], name: str) -> None:
    """Every Variable a captured kernel takes is an argument of the call; no returned shape is symbolic."""
    for step in (s for s in cap.steps if isinstance(s, KernelStep)):
        for v in step.program.kernel.variables:
            if v.name not in values:
                raise JitError(f"TinyJit({name}): kernel {step.program.name} takes Variable {v.name!r}, which is not "
                               "an argument of the call; a replay would run it with the capture's value. Pass the "
                               f"bound variable as an argument ({v.name}=var.bind(value))")
    for t in flatten_outputs(ret, name):
        if is_symbolic(t.shape):
            raise JitError(f"TinyJit({name}): returns a tensor of symbolic shape {t.shape}; a replay would return "
                           "the capture's size. Return tensors of concrete shapes (reduce or shrink the symbolic dim)")


def grad_enabled() -> bool:
    return GradMode.enabled


def describe(args, kwargs) -> tuple[list, list, dict[str, int]]:
    """The call's signature, [(where, what)], its tensors in order, and its bound Variables' values by
    name. A tensor is described by its shape, dtype and device, a Variable by its name and range;
    any other value by itself (lists, tuples and dicts are opened)."""
    signature, tensors, values = [], [], {}

    def walk(x, path: str) -> None:
        if isinstance(x, Variable):
            if x.value is None:
                raise JitError(f"TinyJit: {path} is Variable {x.name!r}, not bound; pass {x.name}.bind(value)")
            if values.setdefault(x.name, x.value) != x.value:
                raise JitError(f"TinyJit: Variable {x.name!r} is passed bound to both {values[x.name]} and {x.value}")
            signature.append((path, ("variable", x.name, x.min, x.max)))
        elif isinstance(x, Tensor):
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
    return signature, tensors, values


def show(what: tuple) -> str:
    if what[0] == "tensor":
        return f"a {what[2]} tensor of shape {what[1]} on {what[3]}"
    if what[0] == "value":
        return repr(what[1])
    if what[0] == "mode":
        return f"(training, grad enabled) = {what[1]}"
    return f"{what[0]} {what[1]}"


def flatten_outputs(ret, name: str) -> list:
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


def freeze(ret):
    """The return value with each tensor as (buffer, view, base shape, dtype, device)."""
    if isinstance(ret, Tensor):
        lb = ret.lazydata
        return ("tensor", lb.base.buffer, None if lb.is_base else lb.st, lb.base.shape, lb.dtype, lb.device)
    if isinstance(ret, (list, tuple)):
        return (type(ret), [freeze(v) for v in ret])
    if isinstance(ret, dict):
        return (dict, {k: freeze(v) for k, v in ret.items()})
    return None


def thaw(frozen, buffer_of, live: bool = False):
    """Tensors again, over the buffers `buffer_of(slot)` gives (the frozen buffer itself when live)."""
    if frozen is None:
        return None
    if frozen[0] == "tensor":
        _, ref, st, shape, dtype, device = frozen
        buf = ref if live else ref.buf if isinstance(ref, Kept) else buffer_of(ref)
        base = LazyBuffer.from_buffer(buf, shape, dtype, device)
        return Tensor._make(base if st is None else base._view(st))
    kind, items = frozen
    if kind is dict:
        return {k: thaw(v, buffer_of, live) for k, v in items.items()}
    return kind(thaw(v, buffer_of, live) for v in items)
