"""Every backend adapter that computes LeakyReLU outside the emulator: the frameworks under test
(torch, tensorflow, jax, keras, onnxruntime, paddle, mindspore, torch_npu), the golden's own
self-check row, and the live probes of each framework's default slope.  Each adapter imports its
framework lazily and declares its own facts."""
