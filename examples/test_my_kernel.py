"""A user's pytest file: the example kernels through the `leakyrelu_conformance` fixture.

With conformance installed, the fixture is there (entry point ``pytest11``); from a
checkout, load it by hand: ``pytest -p conformance.pytest_plugin examples/test_my_kernel.py``.
"""
from examples.my_kernel import exact_leaky_relu, exact_leaky_relu_backward, max_leaky_relu


def test_exact_kernel(leakyrelu_conformance):
    leakyrelu_conformance(exact_leaky_relu, backward=exact_leaky_relu_backward,
                          dtypes=["float16", "float32"], alphas=[0.01, 0.2, 1.5])


def test_max_kernel_is_right_for_slopes_up_to_one(leakyrelu_conformance):
    leakyrelu_conformance(max_leaky_relu, dtypes=["float16"], alphas=[0.2], directions=["forward"])
