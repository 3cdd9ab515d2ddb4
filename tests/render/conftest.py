"""The HTML pages the report tests read: written by the command line on small batches, once per session."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance.reference import golden as ref

SHAPE = (2, 16, 32, 32)  # N, C, H, W
WRONG_CHANNEL = 5

_RUN = ("run", "--backend", "cann", "--dtype", "fp16", "--alpha", "0.2", "--direction", "forward",
        "--max-examples", "5")
PAGES = {  # name -> (arguments, the figures the page must show)
    "run-tail-dropped": (_RUN + ("--variant", "tail-dropped"), {"transfer", "ulp", "values", "plan"}),
    "compare-4d": (("compare", "--x", "{dump}/x.npy", "--y", "{dump}/y.npy", "--alpha", "0.2"),
                   {"transfer", "ulp", "values", "shape"}),
    "run-reference": (_RUN + ("--variant", "default-slope", "--reference", "golden"),
                      {"transfer", "ulp", "values", "plan"}),
    "agree": (("agree", "--backend", "golden,cann", "--variant", "default-slope") + _RUN[3:],
              {"transfer", "ulp", "values", "plan"}),
}


@pytest.fixture(scope="session")
def dump_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-D fp32 dump whose channel 5 used the slope 0.01 on its first four rows."""
    d = tmp_path_factory.mktemp("dump")
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    y = ref.compute("forward", x.reshape(-1), 0.2, out_dtype="float32").reshape(SHAPE)
    band = x[:, WRONG_CHANNEL, :4, :]
    y[:, WRONG_CHANNEL, :4, :] = np.where(band > 0, band, band * np.float32(0.01))
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)
    return d


@pytest.fixture(scope="session")
def pages(dump_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The pages of rows run on small batches: a page's figures are those of its rows' findings."""
    from conformance import cli
    from tests.helpers import keep_small_batches

    out = tmp_path_factory.mktemp("html")
    written = {}
    with pytest.MonkeyPatch.context() as mp:
        keep_small_batches(mp)
        for name, (args, _) in PAGES.items():
            written[name] = out / f"{name}.html"
            argv = [a.format(dump=dump_dir) for a in args] + ["--html", str(written[name]), "-q"]
            if argv[0] == "run":
                argv += ["--results-dir", str(out / "results")]
            assert cli.main(argv) == (0 if argv[0] == "agree" else 1), name  # agree's table is no gate
    return written
