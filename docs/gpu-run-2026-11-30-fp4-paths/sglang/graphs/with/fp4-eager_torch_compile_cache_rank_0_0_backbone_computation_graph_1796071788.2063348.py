from __future__ import annotations
import torch
class GraphModule(torch.nn.Module):
    def forward(self, L_self_parameters_proj_: "bf16[2048, 2048]", s77: "Sym(s77)", L_x_: "bf16[s77, 2048]", L_self_buffers_global_scale_: "f32[1]"):
        l_self_parameters_proj_ = L_self_parameters_proj_
        l_x_ = L_x_
        l_self_buffers_global_scale_ = L_self_buffers_global_scale_

        # No stacktrace found for following nodes
        submod_0 = self.submod_0(l_x_, s77, l_self_parameters_proj_, l_self_buffers_global_scale_);  l_x_ = l_self_parameters_proj_ = l_self_buffers_global_scale_ = None
        getitem = submod_0[0]
        getitem_1 = submod_0[1]
        getitem_2 = submod_0[2]
        getitem_3 = submod_0[3];  submod_0 = None
        submod_1 = self.submod_1(getitem, s77, getitem_1);  submod_1 = None
        submod_2 = self.submod_2(getitem_1, s77, getitem);  getitem_1 = s77 = getitem = None
        return (getitem_2, getitem_3, submod_2)

    class submod_0(torch.nn.Module):
        def forward(self, l_x_: "bf16[s77, 2048]", s77: "Sym(s77)", l_self_parameters_proj_: "bf16[2048, 2048]", l_self_buffers_global_scale_: "f32[1]"):
            # File: /work/main/integration/gpu/sglang_piecewise.py:184 in forward, code: h = x @ self.proj
            matmul: "bf16[s77, 2048]" = l_x_ @ l_self_parameters_proj_;  l_x_ = l_self_parameters_proj_ = None

            # File: /work/main/integration/gpu/sglang_piecewise.py:156 in quantize_like_sglang_sm90, code: global_scale_inv = 1.0 / global_scale
            truediv: "f32[1]" = 1.0 / l_self_buffers_global_scale_;  l_self_buffers_global_scale_ = None

            # File: /tmp/site/flashinfer/quantization/fp4_quantization.py:982 in fp4_quantize, code: global_scale = global_scale.to(device=input.device, dtype=torch.float32)
            to: "f32[1]" = truediv.to(device = device(type='cuda', index=0), dtype = torch.float32);  truediv = None

            # File: /tmp/site/flashinfer/utils.py:284 in get_compute_capability, code: return torch.cuda.get_device_capability(device.index)
            get_device_capability = torch.cuda.get_device_capability(0);  get_device_capability = None
            get_device_capability_1 = torch.cuda.get_device_capability(0);  get_device_capability_1 = None

            # File: /tmp/site/flashinfer/quantization/fp4_quantization.py:1007 in fp4_quantize, code: x_q, sf = get_fp4_quantization_module(f"{major}{minor}").fp4_quantize_sm100(
            fp4_quantize_sm100_default = torch.ops.dynafold_flashinfer.fp4_quantize_sm100.default(matmul, to, 16, False, False, False, False, True);  to = None
            getitem: "u8[s77, 1024]" = fp4_quantize_sm100_default[0]
            getitem_1: "u8[128*s77]" = fp4_quantize_sm100_default[1];  fp4_quantize_sm100_default = None

            # File: /tmp/site/flashinfer/quantization/fp4_quantization.py:1025 in fp4_quantize, code: sf = sf.reshape((-1, input.shape[-1] // sf_vec_size))
            reshape: "u8[s77, 128]" = getitem_1.reshape((-1, 128));  getitem_1 = None

            # File: /work/main/integration/gpu/sglang_piecewise.py:186 in forward, code: out = torch.empty_like(h)
            empty_like: "bf16[s77, 2048]" = torch.empty_like(matmul)
            return (matmul, empty_like, getitem, reshape)

    class submod_1(torch.nn.Module):
        def forward(self, h: "bf16[s77, 2048]", s77: "Sym(s77)", out: "bf16[s77, 2048]"):
            # File: /tmp/sglang-py/sglang/srt/utils/custom_op.py:162 in call, code: return op(*args, **kwargs)
            dynafold_gpu_attention = torch.ops.sglang.dynafold_gpu_attention(h, out);  h = out = dynafold_gpu_attention = None
            return ()

    class submod_2(torch.nn.Module):
        def forward(self, out: "bf16[s77, 2048]", s77: "Sym(s77)", h: "bf16[s77, 2048]"):
            # File: /work/main/integration/gpu/sglang_piecewise.py:188 in forward, code: return fp4, sf, out + h
            add: "bf16[s77, 2048]" = out + h;  out = h = None
            return add
