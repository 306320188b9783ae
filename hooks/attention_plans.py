"""FlashInfer's attention plans, as graph data under compile.

FlashInfer's attention wrappers keep what planning computed for `run()` in `_plan_info` (POD:
`_plan_info_p`, `_plan_info_d`): a tvm_ffi Array since 0.6, a list before. Neither can reach a
compiled graph well: Dynamo cannot pass an Array to an operator at all, and a list of ints
becomes constants of the graph, each guarded, so every new plan (FlashInfer's plan holds the
token count and padded batch size) recompiles, and under `fullgraph=True` the ninth one fails.

So the plan is handled where it is set, whoever sets it (`plan()`, `begin_forward`, SGLang's
`fast_decode_plan`, a subclass): each such attribute of a wrapper class becomes a property.
Setting it keeps FlashInfer's value for eager calls and, once the process compiles, an int64
CPU tensor of the same ints; reading it gives FlashInfer's value, except while Dynamo traces,
where it gives the tensor, a graph input like any other (guarded on its length, never on its
values). The woken run operators take that tensor (`plan_info_vec`, hooks/op_narrowing.py) and
hand FlashInfer its list. Wrappers planned before the first compile are remembered, weakly, and
get their tensor when it starts. A process that never compiles keeps FlashInfer's values and
pays one property call per read.

`install(module)` runs right after a module defining such wrappers has executed; the op
declarations' `wake_pending` calls `become_data()` at each compile start.
"""

import torch

# Attributes of a wrapper that hold a plan: `_plan_info` and its POD variants.
PREFIX = "_plan_info"


def install(module):
    """Called once a module defining FlashInfer's attention wrappers has executed. Returns a
    line for the log, or None when it defines none."""
    kept = []
    for name, cls in list(vars(module).items()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        attrs = sorted(_plan_attributes(cls))
        if not attrs:
            continue
        for attr in attrs:
            if not isinstance(cls.__dict__.get(attr), property):
                setattr(cls, attr, _plan_property(attr))
        kept.append(name)
    if not kept:
        return None
    return f"the plans of {', '.join(kept)} kept as graph data for the woken run operators"


def _plan_attributes(cls):
    """The `_plan_info*` attributes the class's own methods assign or read."""
    found = set()
    for value in vars(cls).values():
        code = getattr(value, "__code__", None)
        if code is None:
            continue
        found.update(n for n in code.co_names
                     if n == PREFIX or (n.startswith(PREFIX + "_") and n[len(PREFIX) + 1:].isalnum()))
    return found


# Wrappers planned before the first compile (weakly), and whether the process compiles now.
_planned = None
_compiling = [False]


def _plan_property(attr):
    raw, data = f"_dynafold{attr}", f"_dynafold{attr}_data"

    def get(self):
        if torch.compiler.is_compiling():
            tensor = getattr(self, data, None)
            if tensor is not None:
                return tensor
        return getattr(self, raw)

    def set(self, value):
        setattr(self, raw, value)
        if _compiling[0]:
            setattr(self, data, as_data(value))
        else:
            setattr(self, data, None)
            _remember(self)

    def delete(self):
        delattr(self, raw)
        setattr(self, data, None)

    get.__name__ = set.__name__ = delete.__name__ = attr
    return property(get, set, delete, f"FlashInfer's {attr}, graph data under compile (dynafold)")


def as_data(value):
    """An int64 CPU tensor of the plan's ints, or None when it is not a sequence of ints
    (None itself, a backend's own plan object)."""
    if value is None or isinstance(value, (str, bytes, torch.Tensor)):
        return None
    try:
        values = list(value)
    except TypeError:
        return None
    if not all(type(v) is int for v in values):
        return None
    return torch.tensor(values, dtype=torch.int64)


def _remember(wrapper):
    global _planned
    if _planned is None:
        import weakref
        _planned = weakref.WeakSet()
    try:
        _planned.add(wrapper)
    except TypeError:  # a wrapper that cannot be weakly referenced gets its tensor at next plan
        pass


def become_data():
    """At the first compile start: from now on plans are kept as tensors too, and so are the
    plans made before."""
    if _compiling[0]:
        return
    _compiling[0] = True
    for wrapper in list(_planned or ()):
        for attr in _plan_properties(type(wrapper)):
            try:
                setattr(wrapper, f"_dynafold{attr}_data", as_data(getattr(wrapper, attr)))
            except AttributeError:
                continue
    if _planned is not None:
        _planned.clear()


def _plan_properties(cls):
    """The plan attributes `install` made properties, on the class or a base."""
    return {name for klass in cls.__mro__ for name, value in vars(klass).items()
            if isinstance(value, property) and name.startswith(PREFIX)}
