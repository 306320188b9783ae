from __future__ import annotations
import torch
class GraphModule(torch.nn.Module):
    def forward(self, L_self_parameters_input_norm_: "bf16[2048]", s77: "Sym(s77)", L_x_: "bf16[s77, 2048]", s26: "Sym(s26)", L_residual_: "bf16[s26, 2048]", L_self_parameters_post_norm_: "bf16[2048]", L_self_parameters_gate_up_: "bf16[2048, 8192]", L_self_buffers_global_scale_: "f32[1]"):
        l_self_parameters_input_norm_ = L_self_parameters_input_norm_
        l_x_ = L_x_
        l_residual_ = L_residual_
        l_self_parameters_post_norm_ = L_self_parameters_post_norm_
        l_self_parameters_gate_up_ = L_self_parameters_gate_up_
        l_self_buffers_global_scale_ = L_self_buffers_global_scale_

        # No stacktrace found for following nodes
        submod_0 = self.submod_0(l_x_, s77, l_self_parameters_input_norm_);  l_x_ = l_self_parameters_input_norm_ = None
        getitem = submod_0[0]
        getitem_1 = submod_0[1];  submod_0 = None
        submod_1 = self.submod_1(getitem, s77, getitem_1);  getitem = submod_1 = None
        submod_2 = self.submod_2(l_residual_, s26, getitem_1, s77, l_self_parameters_post_norm_, l_self_parameters_gate_up_, l_self_buffers_global_scale_);  l_residual_ = s26 = getitem_1 = s77 = l_self_parameters_post_norm_ = l_self_parameters_gate_up_ = l_self_buffers_global_scale_ = None
        getitem_2 = submod_2[0]
        getitem_3 = submod_2[1]
        getitem_4 = submod_2[2]
        getitem_5 = submod_2[3];  submod_2 = None
        return (getitem_2, getitem_3, getitem_4, getitem_5)

    class submod_0(torch.nn.Module):
        def forward(self, l_x_: "bf16[s77, 2048]", s77: "Sym(s77)", l_self_parameters_input_norm_: "bf16[2048]"):
            # File: /tmp/site/flashinfer/norm/__init__.py:173 in rmsnorm, code: out = torch.empty_like(input)
            empty_like: "bf16[s77, 2048]" = torch.empty_like(l_x_)

            # File: /tmp/site/flashinfer/norm/__init__.py:174 in rmsnorm, code: _rmsnorm_impl(out, input, weight, eps, enable_pdl)
            rmsnorm_default = torch.ops.dynafold_flashinfer.rmsnorm.default(empty_like, l_x_, l_self_parameters_input_norm_, 1e-06, None);  l_x_ = l_self_parameters_input_norm_ = rmsnorm_default = None

            # File: /work/main/integration/gpu/sglang_piecewise.py:207 in forward, code: attn = torch.empty_like(h)
            empty_like_1: "bf16[s77, 2048]" = torch.empty_like(empty_like)
            return (empty_like, empty_like_1)

    class submod_1(torch.nn.Module):
        def forward(self, out: "bf16[s77, 2048]", s77: "Sym(s77)", attn: "bf16[s77, 2048]"):
            # File: /tmp/sglang-py/sglang/srt/utils/custom_op.py:162 in call, code: return op(*args, **kwargs)
            dynafold_gpu_attention = torch.ops.sglang.dynafold_gpu_attention(out, attn);  out = attn = dynafold_gpu_attention = None
            return ()

    class submod_2(torch.nn.Module):
        def forward(self, l_residual_: "bf16[s26, 2048]", s26: "Sym(s26)", attn: "bf16[s77, 2048]", s77: "Sym(s77)", l_self_parameters_post_norm_: "bf16[2048]", l_self_parameters_gate_up_: "bf16[2048, 8192]", l_self_buffers_global_scale_: "f32[1]"):
            # File: /work/main/integration/gpu/sglang_piecewise.py:209 in forward, code: res = residual.clone()
            clone: "bf16[s26, 2048]" = l_residual_.clone();  l_residual_ = None

            # File: /tmp/site/flashinfer/api_logging.py:2333 in _auto_dump_wrapper, code: return _inner(*args, **kwargs)
            fused_add_rmsnorm_default = torch.ops.dynafold_flashinfer.fused_add_rmsnorm.default(attn, clone, l_self_parameters_post_norm_, 1e-06);  l_self_parameters_post_norm_ = fused_add_rmsnorm_default = None

            # File: /work/main/integration/gpu/sglang_piecewise.py:211 in forward, code: act = flashinfer.silu_and_mul(attn @ self.gate_up)
            matmul: "bf16[s77, 8192]" = attn @ l_self_parameters_gate_up_;  attn = l_self_parameters_gate_up_ = None

            # File: /tmp/site/flashinfer/utils.py:284 in get_compute_capability, code: return torch.cuda.get_device_capability(device.index)
            get_device_capability = torch.cuda.get_device_capability(0);  get_device_capability = None

            # File: /tmp/site/flashinfer/activation.py:108 in silu_and_mul, code: out = torch.empty(
            size = torch.Size([s77, 4096]);  s77 = None
            empty: "bf16[s77, 4096]" = torch.empty(size, device = device(type='cuda', index=0), dtype = torch.bfloat16);  size = None

            # File: /tmp/site/flashinfer/activation.py:113 in silu_and_mul, code: get_act_and_mul_module("silu").silu_and_mul(
            silu_and_mul_default = torch.ops.dynafold_flashinfer.silu_and_mul.default(empty, matmul, True);  matmul = silu_and_mul_default = None

            # File: /work/main/integration/gpu/sglang_piecewise.py:156 in quantize_like_sglang_sm90, code: global_scale_inv = 1.0 / global_scale
            truediv: "f32[1]" = 1.0 / l_self_buffers_global_scale_;  l_self_buffers_global_scale_ = None

            # File: /tmp/site/flashinfer/quantization/fp4_quantization.py:982 in fp4_quantize, code: global_scale = global_scale.to(device=input.device, dtype=torch.float32)
            to: "f32[1]" = truediv.to(device = device(type='cuda', index=0), dtype = torch.float32);  truediv = None

            # File: /tmp/site/flashinfer/utils.py:284 in get_compute_capability, code: return torch.cuda.get_device_capability(device.index)
            get_device_capability_1 = torch.cuda.get_device_capability(0);  get_device_capability_1 = None
            get_device_capability_2 = torch.cuda.get_device_capability(0);  get_device_capability_2 = None

            # File: /tmp/site/flashinfer/quantization/fp4_quantization.py:1007 in fp4_quantize, code: x_q, sf = get_fp4_quantization_module(f"{major}{minor}").fp4_quantize_sm100(
            fp4_quantize_sm100_0_default = torch.ops.dynafold.fp4_quantize_sm100_0.default('90', empty, to, 16, False, False, False, False, True);  to = None
            getitem: "u8[s77, 2048]" = fp4_quantize_sm100_0_default[0]
            getitem_1: "u8[256*s77]" = fp4_quantize_sm100_0_default[1];  fp4_quantize_sm100_0_default = None

            # File: /tmp/site/flashinfer/quantization/fp4_quantization.py:1025 in fp4_quantize, code: sf = sf.reshape((-1, input.shape[-1] // sf_vec_size))
            reshape: "u8[s77, 256]" = getitem_1.reshape((-1, 256));  getitem_1 = None
            return (getitem, reshape, empty, clone)
