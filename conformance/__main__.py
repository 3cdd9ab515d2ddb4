"""``python -m conformance`` is the same as the ``conformance`` console script."""
from conformance.cli import run

run()
