"""The loaders dynafold's finder puts into the specs of the modules it handles.

They are Python on purpose. A module's body, FlashInfer's or torch._dynamo's, must run beneath
Python and C frames only, never beneath a Rust one:

- an exception raised by the body (KeyboardInterrupt and SystemExit included) must propagate
  exactly as with the ordinary loader, after one run of the body;
- a daemon thread still importing when the interpreter finalizes is ended by CPython 3.9-3.13
  with `pthread_exit`, whose unwinding aborts the process when it meets a Rust frame.

So the native side only prepares (reads, folds, compiles) and the waiting and executing happen
here. The fold runs on a native thread without the GIL, because it may wait up to
`DYNAFOLD_NVCC_TIMEOUT` for `nvcc --version`; this thread waits for it in `poll`, which
releases the GIL the way FlashInfer's own `subprocess` wait does.

`_native` is set by the library before any loader is made: `read`, `reads_torch_cuda_home`,
`begin`, `finish`, `after_exec` and `after_import`. None of them raises except KeyboardInterrupt and SystemExit: every other
failure is logged once and answered with None, which means "load the module unchanged".
"""

import os
import select

_native = None
# A wait that outlives its process (a fork from a signal handler mid-import) must notice.
_POLL_SECONDS = 0.5


def _wait(job):
    """Blocks until the native fold is done: its thread closes the pipe's write end. False when
    the wait cannot be trusted (the module is then loaded as FlashInfer ships it).

    poll, not select: a server may hold more than FD_SETSIZE (1024) descriptors."""
    pid = os.getpid()
    try:
        poller = select.poll()
        poller.register(job.fd, select.POLLIN)
        while True:
            if poller.poll(_POLL_SECONDS * 1000):
                return True
            if os.getpid() != pid:
                # The folding thread did not follow the fork; this child loads the original.
                return False
    except OSError:
        return False


def _torch_cuda_home():
    """`(CUDA_HOME,)` as torch's `cpp_extension` computes it (FlashInfer 0.2/0.3 read it), or
    None when it cannot be had: the fold then leaves what depends on it alone.

    Imported here rather than by the native side: it is a module body like any other."""
    try:
        from torch.utils import cpp_extension
        home = cpp_extension.CUDA_HOME
    except Exception:  # noqa: BLE001 - torch's CUDA_HOME lookup failing: no answer, not a crash
        return None
    return (home,) if home is None or isinstance(home, str) else None


class RewritingLoader:
    """Executes a FlashInfer target module from its folded source, or lets the ordinary loader
    run it. Attributes it does not define are the ordinary loader's (get_source, get_data,
    is_package, resource readers), so tracebacks, `inspect` and `importlib.resources` keep
    reading the unchanged file."""

    def __init__(self, inner, name):
        self._inner = inner
        self._name = name

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        job = None
        prepared = None
        data = _native.read(self._name, self._inner, module)
        if data is not None:
            home = _torch_cuda_home() if _native.reads_torch_cuda_home(data) else None
            job = _native.begin(self._name, module, data, home)
        if job is not None and _wait(job):
            prepared = _native.finish(job)
        if prepared is None:
            self._inner.exec_module(module)
        else:
            code, values = prepared
            module.__dict__.update(values)
            exec(code, module.__dict__)
        _native.after_exec(self._name, job if prepared is not None else None)

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def __repr__(self):
        return f"<dynafold RewritingLoader for {self._name}>"


class ObservingLoader:
    """Runs the ordinary loader, then what must follow that module's import: the graph-break
    observer after torch._dynamo, the op declarations after flashinfer.utils."""

    def __init__(self, inner, name):
        self._inner = inner
        self._name = name

    def create_module(self, spec):
        create = getattr(self._inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        inner = self._inner
        inner.exec_module(module)
        # Put the ordinary loader back where introspection looks for it.
        try:
            module.__loader__ = inner
            module.__spec__.loader = inner
        except Exception:  # noqa: BLE001 - a module that refuses the attributes keeps its own loader
            pass
        _native.after_import(self._name, module)

    def __getattr__(self, attr):
        return getattr(self._inner, attr)
