"""Run the cases of a `conformance export-cases` directory on a device; write the outputs beside them.

    python run_cases.py [DIR] [--device npu:0]

`conformance export-cases` copies this file into DIR as ``run_cases.py``.  It needs
numpy and torch (and torch_npu for an ``npu`` device), never the conformance
package, so it runs on a machine that cannot reach the harness.  Each case is
``torch.nn.functional.leaky_relu(x, negative_slope=alpha)`` on the device, forward,
or its autograd gradient for dy, backward -- the calls the ``torch`` and
``torch_npu`` backends make.  The output of case ``ID`` goes to ``cases/ID.out.npy``
(bfloat16 as raw uint16 bits); a call torch refuses writes ``cases/ID.rejected.txt``.
Then, back on the harness: ``conformance compare --manifest DIR``.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

FORMAT = "leakyrelu-conformance-cases/1"


def device_of(name: str) -> torch.device:
    if name.startswith("npu"):
        import torch_npu  # noqa: F401  (registers the npu device with torch)
    return torch.device(name)


def to_torch(a: np.ndarray, dtype: str) -> torch.Tensor:
    a = np.ascontiguousarray(a)
    if dtype == "bfloat16":  # stored as raw bits
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def from_torch(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def compute(case: dict, *, root: Path, device: torch.device) -> torch.Tensor:
    """One case on the device: y for forward, dx for backward."""
    x = to_torch(np.load(root / case["x"], allow_pickle=False), case["dtype"]).to(device)
    alpha = float.fromhex(case["alpha"])
    if case["direction"] == "forward":
        return F.leaky_relu(x, negative_slope=alpha)
    dy = to_torch(np.load(root / case["dy"], allow_pickle=False), case["dtype"]).to(device)
    x.requires_grad_(True)
    F.leaky_relu(x, negative_slope=alpha).backward(dy)
    return x.grad


def run(root: Path, *, device: torch.device) -> int:
    """Every case of the manifest; returns how many were written."""
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT:
        raise SystemExit(f"{root}/manifest.json is not a {FORMAT} manifest; export the cases again")
    done = 0
    for case in manifest["cases"]:
        try:
            out = from_torch(compute(case, root=root, device=device))
        except RuntimeError as exc:  # e.g. a slope the dtype's opmath cannot hold
            (root / case["rejected"]).write_text(f"torch refused negative_slope={float.fromhex(case['alpha'])!r}: "
                                                 f"{exc}\n", encoding="utf-8")
            continue
        np.save(root / case["out"], out, allow_pickle=False)
        done += 1
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", default=str(Path(__file__).parent), help="the export-cases directory")
    parser.add_argument("--device", default="npu:0", help="torch device to run on (default npu:0; cpu to try it)")
    args = parser.parse_args()
    done = run(Path(args.dir), device=device_of(args.device))
    print(f"{done} outputs written under {args.dir}/cases; now run: conformance compare --manifest {args.dir}")


if __name__ == "__main__":
    main()
