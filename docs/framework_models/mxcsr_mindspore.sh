#!/usr/bin/env bash
# MXCSR of every thread of a MindSpore process after one CPU op (needs gdb and ptrace).
#   docs/framework_models/mxcsr_mindspore.sh .venv-mindspore/bin/python
# Measured with mindspore 2.10.0: ActorThread_0 and KernelThread_0 0x9ff2 (DAZ, FZ set),
# the Python thread 0x1fa2 (neither).
set -euo pipefail
python=${1:-.venv-mindspore/bin/python}
"$python" - <<'PY' &
import numpy as np, mindspore as ms, time
ms.set_context(mode=ms.PYNATIVE_MODE); ms.set_device("CPU")
ms.ops.leaky_relu(ms.Tensor(np.full(8, -1e-40, np.float32)), 0.5).asnumpy()
time.sleep(30)
PY
pid=$!
sleep 20
gdb -p "$pid" -batch -ex "thread apply all info registers mxcsr" 2>/dev/null | grep -E "^Thread|mxcsr"
kill "$pid"
