"""Declarations whose full signature no torch schema can say, woken narrowed.

FlashInfer's sampling declarations take a `Generator` (no schema type), `Union[int, Tensor]`
seeds and return a tensor or a tuple (`return_valid`). Each is woken narrowed to how serving
code calls it: the operator leaves out what cannot be said (given back to FlashInfer's function
with the one value that fits) and narrows the rest; Dynamo calls the operator for a call whose
values fit, and traces FlashInfer's function as shipped for any other. The fake FlashInfer
wrote is called with the parameters it takes (some rotted without the seeds, which cannot change
a result's shape). fp4_quantize's cute-dsl kernel (dynafold's own declaration) is narrowed the
same way: its NVFP4 "4over6" recipe object is left out, and a call with a recipe is traced as
shipped.
"""

import inspect
import typing

import torch


def _fits_none(value):
    return value is None


def _fits_false(value):
    return value is False


def _fits_not_a_tensor(value):
    return not isinstance(value, torch.Tensor)


# Parameters torch's schemas cannot express, narrowed to the form serving code calls them with:
# name -> (the annotation in the operator, or None to leave the parameter out of it, the values
# that fit, the value a left-out parameter is given back to FlashInfer's function with). A call
# whose values fit goes through the operator; any other call is traced as FlashInfer ships it.
# These are FlashInfer's sampling ops': `generator` (no schema type for a Generator),
# `seed`/`offset` (Union[int, Tensor]) and `return_valid` (it turns the Tensor result into a
# tuple).
NARROWED = {
    "generator": (None, _fits_none, None),
    "seed": (typing.Optional[int], _fits_not_a_tensor, None),
    "offset": (typing.Optional[int], _fits_not_a_tensor, None),
    "return_valid": (None, _fits_false, False),
    # fp4_quantize's cute-dsl kernel (0.7.2 on): the resolved NVFP4 "4over6" recipe, a dataclass
    # (no schema type); None is the recipe off, FlashInfer's default.
    "nvfp4_4over6": (None, _fits_none, None),
}
# Parameters a fake may lack (added to the kernel after its fake was written) because they cannot
# change the result's shape, dtype or strides: the random stream's position.
FAKE_MAY_LACK = {"seed", "offset"}


def is_generator(hint):
    """A Generator, bare or Optional: torch infers no schema type for it."""
    return "Generator" in str(hint)


def is_union(hint):
    """A Union other than Optional, which torch's schemas cannot express."""
    return typing.get_origin(hint) is typing.Union and len(
        [a for a in typing.get_args(hint) if a is not type(None)]) > 1


def needed(hints):
    """Whether a declaration with these resolved annotations needs narrowing: a Union (its
    result's included), a Generator parameter, or one NARROWED leaves out of the operator."""
    return any(is_union(hint) or (name != "return" and is_generator(hint))
               or (name in NARROWED and NARROWED[name][0] is None)
               for name, hint in hints.items())


class Narrowing:
    """One declaration narrowed by NARROWED: its operator's prototype (for the schema), the
    call check Dynamo inlines, and its kernel and fake adapted to the operator's parameters."""

    def __init__(self, names, kept, dropped, checks, prototype):
        self.names = names          # FlashInfer's parameter names, in order
        self.kept = kept            # (index, name, default) of those the operator takes
        self.dropped = dropped      # (index, value given back) of those left out of it
        self.checks = checks        # (index, name, default, fits) tested per call
        self.prototype = prototype

    @classmethod
    def of(cls, fn, hints):
        """The narrowing of `fn`, or why it cannot be narrowed."""
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return "schema not expressible (no signature)"
        names, kept, dropped, checks, params = [], [], [], [], []
        for index, param in enumerate(sig.parameters.values()):
            if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                return "schema not expressible (variadic or keyword-only parameters)"
            names.append(param.name)
            hint = hints.get(param.name, param.annotation)
            default = None if param.default is param.empty else param.default
            rule = NARROWED.get(param.name)
            if rule is None:
                if is_union(hint):
                    return "schema not expressible (a Union parameter)"
                if is_generator(hint):
                    return "schema not expressible (a Generator parameter)"
                kept.append((index, param.name, default))
                params.append(param.replace(annotation=hint))
                continue
            annotation, fits, given_back = rule
            checks.append((index, param.name, default, fits))
            if annotation is None:
                dropped.append((index, given_back))
            else:
                kept.append((index, param.name, default))
                params.append(param.replace(annotation=annotation))
        result = hints.get("return", sig.return_annotation)
        if is_union(result):
            members = [a for a in typing.get_args(result) if a is not type(None)]
            if "return_valid" not in names or members[0] is not torch.Tensor:
                return "schema not expressible (a Union result)"
            result = torch.Tensor

        def prototype(*args):
            raise NotImplementedError

        prototype.__signature__ = sig.replace(parameters=params, return_annotation=result)
        prototype.__name__ = fn.__name__
        return cls(names, kept, dropped, checks, prototype)

    def through_op(self, op, as_shipped):
        """What Dynamo calls in place of FlashInfer's function: the operator when the call fits,
        else the function as shipped. (Dynamo inlines it with no source for its closure, so the
        closure holds only tuples, constants and functions.)"""
        checks = tuple(self.checks)
        kept = tuple(self.kept)

        def through_op(*args, **kwargs):
            for index, name, default, fits in checks:
                if not fits(args[index] if index < len(args) else kwargs.get(name, default)):
                    return as_shipped(*args, **kwargs)
            return op(*[args[index] if index < len(args) else kwargs.get(name, default)
                        for index, name, default in kept])
        return through_op

    def full_args(self, args):
        """The operator's arguments as FlashInfer's function takes them."""
        out = list(args)
        for index, value in self.dropped:
            out.insert(index, value)
        return out

    def kernel(self, fn):
        def kernel(*args):
            return fn(*self.full_args(args))
        return kernel

    def adapt_fake(self, fake):
        """FlashInfer's fake, given the parameters it takes by name; a reason when it lacks one
        that could change the result."""
        try:
            takes = set(inspect.signature(fake).parameters)
        except (TypeError, ValueError):
            return "fake has no signature"
        lacking = [n for n in self.names if n not in takes and n not in FAKE_MAY_LACK]
        if lacking:
            return f"fake lacks {', '.join(lacking)}"
        names = self.names

        def adapted(*args):
            full = self.full_args(args)
            return fake(**{n: v for n, v in zip(names, full) if n in takes})
        return adapted


def as_shipped(fn):
    """A copy of `fn` that Dynamo traces as FlashInfer ships it (the substitution is keyed to
    `fn` itself), for the calls a narrowed operator does not take."""
    import types
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy
