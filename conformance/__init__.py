"""conformance: bit-exact LeakyReLU conformance across PyTorch, TensorFlow and CANN."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before any TensorFlow import

__version__ = "0.1.0"
