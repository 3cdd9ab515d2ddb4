"""A LeakyReLU written the way a PyTorch user writes it: tensors in, a tensor out.

The harness finds that it takes torch tensors (it raises on a numpy array), hands it each dtype
as torch's own (``torch.bfloat16`` included) and takes its backward from autograd:

    conformance run --backend examples/torch_kernel.py:leaky_relu --dtype bf16,fp16 --alpha 0.2
"""
import torch.nn.functional as F


def leaky_relu(x, alpha):
    return F.leaky_relu(x, negative_slope=alpha)
