"""A small model with a PReLU, an RReLU and their functional forms, for ``conformance audit``.

``make`` builds it as constructed; ``trained`` builds it with one PReLU weight changed, as training
would leave it:

    conformance audit examples/prelu_net.py:trained
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3)
        self.act = nn.PReLU(num_parameters=3)
        self.noise = nn.RReLU(0.1, 0.3)
        self.slope = nn.Parameter(torch.full((3,), 0.2))

    def forward(self, x):
        x = self.noise(self.act(self.conv(x)))
        return F.rrelu(F.prelu(x, self.slope), training=True)


def make():
    return Net()


def trained():
    net = Net()
    with torch.no_grad():
        net.act.weight[1] = 0.3
    return net
