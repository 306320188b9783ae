"""A CPU stand-in for any FlashInfer kernel, made from its row of the op audit.

integration/op_audit/audit.json says, per declaration and release, which arguments the kernel
writes (`writes`, `scratch`), what its result is (`returns`) and whether it draws from the
random generator (`rng`), read from FlashInfer's C++/CUDA source. The stand-in does exactly that
and nothing else: it does not compute the op. Each written buffer gets a deterministic function
of every input (so a stale or reordered read shows), each draw advances the generator and enters
what is written (so a dropped draw shows), and the result is a new tensor, the aliased argument,
or FlashInfer's own fake's value where the kernel returns no tensor.
"""

import re

import torch


def rows(audit, release):
    """(module, function) -> the audit's merged row: one function declared under several names
    (one per loader build) writes the same parameters in each."""
    out = {}
    for row in audit:
        if row["release"] != release:
            continue
        key = (row["module"], row["function"])
        merged = out.setdefault(key, {"writes": [], "returns": row["returns"], "rng": False,
                                      "names": []})
        merged["writes"] += [w for w in row["writes"] + row["scratch"]
                             if w not in merged["writes"]]
        merged["rng"] = merged["rng"] or row["rng"]
        merged["names"].append(row["name"])
    return out


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _mix(values):
    """One number from every input: tensors' contents and plain numbers."""
    total = 0.0
    for value in values.values():
        for t in _tensors(value):
            if t.numel():
                total += float(t.detach().float().sum()) * 1e-3
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total += float(value) * 1e-2
        if isinstance(value, (list, tuple)) and value and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            # A plan vector: a list of ints in eager, the same ints as a tensor under compile
            # (hooks/ops/mechanisms/attention_plans.py); both count alike.
            total += float(sum(value)) * 1e-3
    return round(total, 3)


def fill(t, value):
    """Writes a pattern offset by `value` into `t`, in its own dtype."""
    if t.dtype == getattr(torch, "float4_e2m1fn_x2", None):
        # Packed FP4 (the CuTe DSL FP4 quantizers' values) has no conversions: its bytes.
        t = t.view(torch.uint8)
    pattern = torch.arange(t.numel(), dtype=torch.float32).reshape(t.shape) % 5 + value
    if t.dtype == torch.bool:
        t.copy_(pattern.long() % 2 == 0)
    elif t.dtype.is_floating_point:
        t.copy_(pattern.clamp(-400, 400).to(t.dtype))
    else:
        t.copy_((pattern.long() % 100).to(t.dtype))


class StandIn:
    """The kernel of one declaration, per its audit row; `fake` is FlashInfer's fake (or
    dynafold's), used for the shape of a new result as FlashInfer's own wrapper allocates it."""

    def __init__(self, row, fake=None, rest_fake=None):
        self.row = row
        self.fake = fake
        # The fresh tensors a kernel returns after the caller's `output` ("list(alias:output,
        # fresh, ...)": cutlass_fused_moe), whose fake FlashInfer does not have.
        self.rest_fake = rest_fake

    traced = False

    def __call__(self, values):
        if torch.compiler.is_compiling():
            # Dynamo is tracing the declared function itself, not calling its operator.
            self.traced = True
        row = self.row
        mix = _mix(values)
        if row["rng"] and "generator" in values and values.get("seed") is None:
            # FlashInfer's sampling reads (seed, offset) from the generator when the caller
            # gives none (get_seed_and_offset), which advances it; kernels seeded by a tensor
            # argument (mamba's rand_seed) draw from that and leave the generator alone.
            generator = values["generator"]
            if not isinstance(generator, torch.Generator):
                generator = None
            mix += int(torch.randint(0, 97, (1,), generator=generator))
        for i, name in enumerate(row["writes"]):
            for t in _tensors(values.get(name)):
                fill(t, mix + i)
        returns = row["returns"]
        flagged = re.fullmatch(r"alias:(\w+) \(tuple\(alias:(\w+), alias:(\w+)\) with (\w+)\)",
                               returns)
        if flagged:
            # "alias:out (tuple(alias:out, alias:lse) with return_lse)" (dynafold's SM120
            # fmha_v2 runner): the caller's buffer itself, or the pair of the caller's buffers
            # when the flag is set, as the function returns them.
            first, a, b, flag = flagged.groups()
            return (values[a], values[b]) if values.get(flag) else values[first]
        pair = re.fullmatch(r"tuple\(alias:(\w+), none\)", returns)
        if pair:
            # dynafold's RecurrentKDAPrefillWrapper.run boundary: (the caller's output, None).
            return (values[pair[1]], None)
        pair = re.match(r"tuple\(alias:(\w+), alias:(\w+)\) when \1 is given", returns)
        if pair and isinstance(values.get(pair[1]), torch.Tensor):
            # "tuple(alias:out, alias:lse) when out is given ..." (dynafold's fmha_varlen): the
            # caller's buffer and the second argument as given (a tensor, or None).
            return (values[pair[1]], values[pair[2]])
        if returns.startswith("alias:") and returns[6:] in values:
            return values[returns[6:]]
        if returns == "none" or self.fake is None:
            return None
        given = re.search(r"else alias:(\w+)$", returns)
        if given and isinstance(values.get(given[1]), torch.Tensor):
            # dynafold's GEMM boundaries ("fresh when out is None; else alias:out"): the
            # caller's buffer, written above, is the result.
            return values[given[1]]
        gives_back = _gives_back_output(returns, values)
        if gives_back and self.rest_fake is not None and "list(alias:output" in returns and \
                not values.get("min_latency_mode"):
            result = [values["output"], *self.rest_fake(**values)]
            for i, t in enumerate(_tensors(result[1:])):
                fill(t, mix + 10 + i)
            return result
        result = self.fake(**values)
        for i, t in enumerate(_tensors(result)):
            fill(t, mix + 10 + i)
        then = re.search(r", then ((?:alias:\w+(?:, )?)+)", returns)
        if then:
            # dynafold's fresh-result boundaries that return argument pools after the fresh
            # tensors ("fresh ..., then alias:conv_state, alias:ssm_state":
            # gdn_fused_decode_step), written above.
            fresh = result if isinstance(result, tuple) else (result,)
            return (*fresh, *[values[n] for n in re.findall(r"alias:(\w+)", then[1])])
        if gives_back:
            # The fused MoE ops and quantized allreduce: the caller's `output`, when given and
            # the result is finalized, is the result (or its first element).
            if isinstance(result, (list, tuple)):
                return type(result)([values["output"], *result[1:]])
            return values["output"]
        return result


def _gives_back_output(returns, values):
    return ("alias:output" in returns and isinstance(values.get("output"), torch.Tensor)
            and values.get("do_finalize", True) is not False)
