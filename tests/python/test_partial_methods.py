"""FlashInfer's `run_return_lse = functools.partialmethod(run, return_lse=True)` made a plain
method (hooks/ops/mechanisms/partial_methods.py): the same call as the partialmethod in every way a caller can
make it, and one Dynamo traces. The traced FlashInfer wrappers (`forward_return_lse` of the
paged and ragged prefill, the shared-prefix cascade) are in test_api_status.py's table."""
import functools
import sys
import inspect
import types

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "python" / "helpers"))
from engine_source import engine

partial_methods = engine("mechanisms.partial_methods")


def wrapper_module():
    """A module shaped like flashinfer.prefill: a wrapper whose `run` takes `return_lse`, its
    partialmethod, and a subclass with its own `run` and partialmethod (attention/_core.py)."""
    module = types.ModuleType("prefill_like")
    source = '''
import functools
import sys

class Wrapper:
    scale = 2.0

    def run(self, q, k, *, out=None, return_lse=False, tag="base"):
        """FlashInfer's run."""
        o = q * self.scale + k
        return (o, q.sum(-1), tag) if return_lse else (o, tag)

    run_return_lse = functools.partialmethod(run, return_lse=True)
    run_tagged = functools.partialmethod(run, tag="bound")

class Sub(Wrapper):
    def run(self, q, k, *, out=None, return_lse=False, tag="sub"):
        return Wrapper.run(self, q, k, return_lse=return_lse, tag=tag)

    run_return_lse = functools.partialmethod(run, return_lse=True)
'''
    exec(compile(source, "prefill_like.py", "exec"), module.__dict__)
    module.__dict__["Wrapper"].__module__ = module.__name__
    module.__dict__["Sub"].__module__ = module.__name__
    return module


CALLS = [
    ((), {}),
    ((), {"tag": "caller"}),
    ((), {"return_lse": False}),  # the caller's keyword wins, as with partialmethod
]


@pytest.mark.parametrize("cls_name", ["Wrapper", "Sub"])
@pytest.mark.parametrize("extra_args,extra_kwargs", CALLS)
def test_plain_method_makes_the_partialmethods_call(cls_name, extra_args, extra_kwargs):
    shipped, plain = wrapper_module(), wrapper_module()
    made = partial_methods.install(plain)
    assert made == ["Wrapper.run_return_lse", "Wrapper.run_tagged", "Sub.run_return_lse"]
    q, k = torch.arange(6.0).reshape(2, 3), torch.ones(2, 3)
    for attr in ("run_return_lse", "run_tagged"):
        want = getattr(getattr(shipped, cls_name)(), attr)(q, k, *extra_args, **extra_kwargs)
        got = getattr(getattr(plain, cls_name)(), attr)(q, k, *extra_args, **extra_kwargs)
        assert repr(got) == repr(want), (attr, got, want)
        shipped_cls, plain_cls = getattr(shipped, cls_name), getattr(plain, cls_name)
        assert (inspect.signature(getattr(plain_cls, attr))
                == inspect.signature(getattr(shipped_cls, attr)))
        # Through the class, with the instance first, as partialmethod allows.
        assert repr(getattr(plain_cls, attr)(plain_cls(), q, k)) == repr(
            getattr(shipped_cls, attr)(shipped_cls(), q, k))


def test_dynamo_traces_the_plain_method_where_partialmethod_stops_it():
    shipped, plain = wrapper_module(), wrapper_module()
    partial_methods.install(plain)
    q, k = torch.randn(2, 3), torch.randn(2, 3)

    def forward(wrapper):
        return wrapper.run_return_lse(q, k)[0] + 1

    with pytest.raises(Exception, match="partial"):
        torch._dynamo.reset()
        torch.compile(forward, fullgraph=True, backend="eager")(shipped.Sub())
    torch._dynamo.reset()
    got = torch.compile(forward, fullgraph=True, backend="eager")(plain.Sub())
    assert torch.equal(got, forward(shipped.Sub()))


def test_only_partialmethods_over_plain_functions_are_replaced():
    module = wrapper_module()
    odd = functools.partialmethod(classmethod(lambda cls, x: x), 1)
    module.Wrapper.odd = odd
    made = partial_methods.install(module)
    assert "Wrapper.odd" not in made and module.Wrapper.__dict__["odd"] is odd
