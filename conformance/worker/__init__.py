"""Out-of-process backends: one backend served over stdin/stdout by ``conformance worker``.

- :mod:`.protocol`: length-prefixed frames holding ``.npz`` bytes (never pickle) and the
  messages built from them (hello, call, result, error);
- :mod:`.server`: the worker's loop around one in-process backend;
- :mod:`.client`: the backend that starts a worker from a command line, checks its
  handshake, and turns a crash, a hang or garbage into an error on that call's row.
"""
