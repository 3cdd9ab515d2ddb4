"""A small DCGAN discriminator, the model of the ``conformance audit`` examples (docs/commands/audit.md).

Its three LeakyReLUs show the three origins of a slope in source: ``act1`` passes 0.2, ``act2``
relies on torch's default 0.01 (the implicit default), and ``forward`` passes ``self.slope``
(dynamic: not known before running).  ``discriminator.onnx`` beside it is the ONNX export of
``changed()``, whose last slope is 0.25 instead of 0.2; rewrite it with
``python examples/discriminator.py examples/discriminator.onnx``.
"""
import sys

import torch.nn as nn
from torch.nn import functional as F


class Discriminator(nn.Module):
    def __init__(self, slope=0.2):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 4, 2, 1)
        self.act1 = nn.LeakyReLU(0.2, inplace=True)
        self.conv2 = nn.Conv2d(4, 8, 4, 2, 1)
        self.act2 = nn.LeakyReLU()  # the implicit default
        self.conv3 = nn.Conv2d(8, 1, 4, 1, 0)
        self.slope = slope

    def forward(self, x):
        x = self.act2(self.conv2(self.act1(self.conv1(x))))
        return F.leaky_relu(self.conv3(x), negative_slope=self.slope)


def make():
    """``conformance audit examples/discriminator.py:make``: the model as written."""
    return Discriminator()


def changed():
    """The model with its last slope changed to 0.25, as exported to discriminator.onnx."""
    return Discriminator(slope=0.25)


def export_onnx(path: str) -> None:
    """Write the ONNX export of :func:`changed` to ``path``."""
    import torch

    torch.manual_seed(0)
    torch.onnx.export(changed().eval(), (torch.zeros(1, 1, 16, 16),), path, dynamo=False)


if __name__ == "__main__":
    export_onnx(sys.argv[1] if len(sys.argv) > 1 else "discriminator.onnx")
