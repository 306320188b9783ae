"""Keeps FlashInfer's attention plans in a form Dynamo can pass to an operator.

FlashInfer's attention wrappers keep what `plan()` computed for `run()` in `_plan_info`: a
tvm_ffi Array since 0.6, which Dynamo cannot hand to the woken run operators (`int[]
plan_info_vec`): every wrapper's `run()` failed to trace on it. Once a process compiles, each
wrapper's plan info is kept as a list of the same ints (tvm_ffi takes the list in eager calls
too); wrappers planned before the first compile are remembered, weakly, and converted when it
starts. A process that never compiles keeps FlashInfer's Arrays.

`install(module)` runs right after a module defining such wrappers has executed; the op
declarations' `wake_pending` calls `become_lists()` at each compile start.
"""

import functools
import inspect


def install(module):
    """Called once a module defining FlashInfer's attention wrappers has executed. Returns a
    line for the log, or None when it defines none."""
    kept = []
    for name, cls in list(vars(module).items()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        plan = cls.__dict__.get("plan")
        if not inspect.isfunction(plan) or not any(
                inspect.isfunction(f) and "_plan_info" in f.__code__.co_names
                for f in vars(cls).values()):
            continue
        kept_plan = _keeping_plan(plan)
        for attr, value in list(vars(cls).items()):
            if value is plan:  # `plan` and its aliases (`begin_forward`)
                setattr(cls, attr, kept_plan)
        kept.append(name)
    if not kept:
        return None
    return f"the plans of {', '.join(kept)} kept for the woken run operators"


# Wrappers planned before the first compile (weakly), and whether plans are now kept as lists.
_planned = None
_plans_as_lists = [False]


def _keeping_plan(plan):
    def kept_plan(self, *args, **kwargs):
        result = plan(self, *args, **kwargs)
        if _plans_as_lists[0]:
            _plan_as_list(self)
        else:
            remember(self)
        return result

    functools.update_wrapper(kept_plan, plan)
    return kept_plan


def remember(wrapper):
    global _planned
    if _planned is None:
        import weakref
        _planned = weakref.WeakSet()
    try:
        _planned.add(wrapper)
    except TypeError:  # a wrapper that cannot be weakly referenced stays as it is
        pass


def _plan_as_list(wrapper):
    """The wrapper's plan info as a list of ints, when it is a sequence of ints that is not one."""
    info = getattr(wrapper, "_plan_info", None)
    if info is None or isinstance(info, list):
        return
    try:
        values = list(info)
    except TypeError:
        return
    if all(type(v) is int for v in values):
        wrapper._plan_info = values


def become_lists():
    """At the first compile start: from now on plans are kept as lists, and so are the plans
    made before."""
    if _plans_as_lists[0]:
        return
    _plans_as_lists[0] = True
    for wrapper in list(_planned or ()):
        _plan_as_list(wrapper)
    if _planned is not None:
        _planned.clear()
