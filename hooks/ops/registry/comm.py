"""Communication: the all-reduce and all-to-all ops of flashinfer.comm."""

from _dynafold_ops.engine.record import Correction, Fake, Family, Op, Sweep

OPS = []

OPS.append(Op(
    family=Family.COMM,
    module="flashinfer.comm.trtllm_ar",
    function="get_trtllm_comm_module.<locals>.trtllm_moe_allreduce_fusion",
    # include/flashinfer/comm/trtllm_moe_allreduce_fusion.cuh:815 writes moe_allreduce_out.
    correction=Correction(also_mutates=("moe_allreduce_out",)),
))

OPS.append(Op(
    family=Family.COMM,
    module="flashinfer.comm.trtllm_alltoall",
    function="get_comm_alltoall_module.<locals>.moe_comm",
    # 0.6.16/0.7.2 trtllm_alltoall: the FIFO and its counters, the prepare workspace.
    correction=Correction(also_mutates=("all_workspaces",)),
))
OPS.append(Op(
    family=Family.COMM,
    module="flashinfer.comm.trtllm_alltoall",
    function="get_comm_alltoall_module.<locals>.moe_prepare",
    correction=Correction(also_mutates=("workspace",)),
))

OPS.append(Op(
    family=Family.COMM,
    module="flashinfer.comm.trtllm_moe_alltoall",
    function="get_moe_alltoall_module.<locals>.moe_a2a_combine",
    # Quantized combine writes its block scales (csrc/trtllm_moe_alltoall.cu:486-524).
    correction=Correction(also_mutates=("output_scales",)),
    by_release={
        # No quantized combine yet (no `output_scales`): nothing undeclared is written. The
        # same body in 0.6.3 and 0.6.11.post1 (SGLang 0.5.9's and 0.5.12's pins).
        **{release: Correction() for release in ("0.6.3", "0.6.7.post3", "0.6.11.post1")},
    },
    # As on 0.6.16: a fresh result and no fake; not "correction names parameters the kernel lacks",
    # 0.6.16's entry naming `output_scales`.
    sweep=Sweep(old_layout="not woken: returns a value and has no fake"),
))
OPS.append(Op(
    family=Family.COMM,
    module="flashinfer.comm.trtllm_moe_alltoall",
    function="get_moe_alltoall_module.<locals>.moe_a2a_combine_into",
    correction=Correction(also_mutates=("output_scales",)),
))
OPS.append(Op(
    family=Family.COMM,
    module="flashinfer.comm.trtllm_moe_alltoall",
    function="_get_moe_alltoall_module_for_target.<locals>.moe_a2a_combine",
    correction=Correction(also_mutates=("output_scales",)),
))
OPS.append(Op(
    family=Family.COMM,
    module="flashinfer.comm.trtllm_moe_alltoall",
    function="_get_moe_alltoall_module_for_target.<locals>.moe_a2a_combine_into",
    correction=Correction(also_mutates=("output_scales",)),
))
OPS.append(Op(
    family=Family.COMM,
    module="flashinfer.comm.quantized_allreduce",
    function="quantized_all_reduce",
    correction=Correction(dormant="result is the caller's output only when one is given"),
))


def _decode_cp_a2a_alltoall(values):
    """`decode_cp_a2a_alltoall`'s `(partial_o_out, softmax_stats_out)`: the kernel allocates each
    with its input's shape and dtype, contiguous (csrc/trtllm_dcp_alltoall.cu alltoallDcpNativeOp,
    `alloc_tensor`; 0.6.16 :114, 0.7.4 :189)."""
    partial_o, softmax_stats = values["partial_o"], values["softmax_stats"]
    return partial_o.new_empty(partial_o.shape), softmax_stats.new_empty(softmax_stats.shape)


# The all-to-all of decode context parallelism (flashinfer.comm.dcp_alltoall, 0.6.16 on):
# FlashInfer declares it (get_dcp_alltoall_module) with no fake, so it was left as shipped
# ("returns a value and has no fake") and Dynamo stopped at its tvm_ffi call. The kernel writes
# the `workspace` FIFO and flags it declares mutated, nothing else of the caller's, and returns
# two fresh tensors (the op audit's rows, 0.6.16 to 0.7.4): the fake gives them. The public
# function's `out=` form calls 0.7.x's decode_cp_a2a_alltoall_into, which returns nothing.
OPS.append(Op(
    family=Family.COMM,
    module="flashinfer.comm.dcp_alltoall",
    function="get_dcp_alltoall_module.<locals>.decode_cp_a2a_alltoall",
    name="flashinfer::decode_cp_a2a_alltoall",
    fake=Fake(_decode_cp_a2a_alltoall, ("partial_o", "softmax_stats")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))
