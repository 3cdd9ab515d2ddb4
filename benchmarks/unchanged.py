"""Proof that a change of layout changed no output: save every output once, check it later.

``python -m benchmarks.unchanged save DIR`` (or ``python <path>/unchanged.py save DIR``: it
imports only numpy and the standard library) runs, on the checkout in the current directory
(``--checkout`` names another), each with ``--seed 0`` and ``PYTHONHASHSEED=0``:

- ``conformance``: ``conformance run`` with ``make conformance``'s arguments (its JSON);
- ``conformance-all``: the same with ``make conformance-all``'s backend set;
- ``selftest-generated``: ``conformance selftest --generated 2000``'s printed confusion matrix
  (the command has no JSON option), 400 columns wide so no name is cut;
- ``compare-<defect>``: ``conformance compare``'s JSON on eleven defect dumps made here with
  numpy alone, and ``compare-msprobe-leaky3`` on the msprobe dump of ``tests/fixtures``
  (copied into ``DIR`` at save, read from there at check).  The inputs' sha256 is checked first.

``check DIR`` reruns them with the settings in ``DIR/meta.json`` and prints one line per
output, ``identical`` or ``differs: <first differing JSON path>``; exit 1 on any difference.
``diff DIR OTHER`` does the same against a second saved directory (two checkouts saved at once).
``hypothesis-local-constants`` records the literals hypothesis mixes into its draws (it reads
every local module's source), which ``run``'s examples depend on; ``save --without-local-constants``
turns that off on both sides (the setting is kept in ``DIR``).

Which code runs: every command is ``sys.executable -m conformance ...`` with
``PYTHONPATH=<checkout>``, ahead of setuptools' editable finder, which comes last.  Paddle
and mindspore run in their own environments, whose editable install may point at another
checkout: ``CONFORMANCE_PADDLE_PYTHON``/``CONFORMANCE_MINDSPORE_PYTHON`` name a wrapper that
starts that environment's python on a bootstrap which puts the checkout first on
``sys.path``, drops the editable finders, logs ``conformance.__file__`` and runs ``-m
conformance worker``.  Every ``conformance.__file__`` seen is printed; one outside the
checkout stops the run.  The environments' pythons: ``--paddle-python``/``--mindspore-python``,
else those variables, else ``<checkout>/.venv-paddle`` and ``.venv-mindspore``.

Normalised: the temporary directory and the checkout's path in any string, fields whose name
records time (``duration``, ``elapsed``, ``timestamp``, ...), durations and trailing blanks
in printed text, and ``versions.conformance`` (the harness's own version).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

try:
    from benchmarks.unchanged_dumps import Dump, defect_dumps, tree_sha256, write_dumps
except ImportError:  # run by path from another checkout: this file's directory is on sys.path
    from unchanged_dumps import Dump, defect_dumps, tree_sha256, write_dumps

SEED = 0
GENERATED = 2000
ALL_BACKENDS = "golden,torch,tensorflow,cann,jax,onnxruntime,keras,paddle,mindspore"
OWN_ENVIRONMENTS = {"paddle": ".venv-paddle", "mindspore": ".venv-mindspore"}
MSPROBE_FIXTURE = Path("tests/fixtures/msprobe/leaky3")
WIDTH = "400"
TIME_KEY = re.compile(r"(^|_)(time|times|duration|durations|elapsed|seconds|timestamp|started|finished|took|wall)"
                      r"(_|$)", re.IGNORECASE)
TIME_TEXT = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|sec|seconds)\b")
HARNESS_VERSION = ("versions", "conformance")


class Failure(Exception):
    """A set-up problem: printed as one line, exit 2."""


# ----------------------------------------------------------------------------- the differ

def normalise(doc: Any, *, paths: Mapping[str, str], at: tuple[str, ...] = ()) -> Any:
    """``doc`` with time fields, the harness version and machine paths replaced by placeholders."""
    if isinstance(doc, dict):
        return {k: _normalise_field(k, v, paths=paths, at=(*at, k)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [normalise(v, paths=paths, at=at) for v in doc]
    if isinstance(doc, str):
        return normalise_text(doc, paths=paths, durations=False)
    return doc


def _normalise_field(key: str, value: Any, *, paths: Mapping[str, str], at: tuple[str, ...]) -> Any:
    if at == HARNESS_VERSION:
        return "<harness version>"
    if TIME_KEY.search(key) and not isinstance(value, (dict, list)):
        return "<time>"
    return normalise(value, paths=paths, at=at)


def normalise_text(text: str, *, paths: Mapping[str, str], durations: bool = True) -> str:
    """``text`` with each path in ``paths`` replaced by its placeholder (longest first)."""
    for path in sorted(paths, key=len, reverse=True):
        text = text.replace(path, paths[path])
    return TIME_TEXT.sub("<time>", text) if durations else text


def first_difference(old: Any, new: Any, *, path: str = "$") -> Optional[str]:
    """The JSON path of the first place ``new`` differs from ``old`` (key order and types count)."""
    if type(old) is not type(new):
        return path
    if isinstance(old, dict):
        return _first_dict_difference(old, new, path=path)
    if isinstance(old, list):
        for i, (a, b) in enumerate(zip(old, new)):
            found = first_difference(a, b, path=f"{path}[{i}]")
            if found:
                return found
        return None if len(old) == len(new) else f"{path}[{min(len(old), len(new))}]"
    if isinstance(old, float):
        return None if repr(old) == repr(new) else path
    return None if old == new else path


def _first_dict_difference(old: dict, new: dict, *, path: str) -> Optional[str]:
    for key in old:
        if key not in new:
            return f"{path}.{key}"
        found = first_difference(old[key], new[key], path=f"{path}.{key}")
        if found:
            return found
    extra = [k for k in new if k not in old]
    if extra:
        return f"{path}.{extra[0]}"
    return None if list(old) == list(new) else f"{path} (key order)"


# ----------------------------------------------------------------------------- running the checkout

BOOTSTRAP = '''import runpy, sys
checkout, log, args = sys.argv[1], sys.argv[2], sys.argv[3:]
if args[:1] != ["-m"]:
    sys.exit("worker wrapper: expects -m MODULE ARGS, got " + " ".join(args))
sys.path.insert(0, checkout)
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
import conformance
with open(log, "a") as f:
    f.write(conformance.__file__ + "\\n")
sys.argv = [args[1], *args[2:]]
runpy.run_module(args[1], run_name="__main__", alter_sys=True)
'''


# What hypothesis adds to its draws from the source of every local module (integer and float
# literals, 1 draw in 40): the examples of `run` change when the package's literals change.
CONSTANTS = '''import importlib, pkgutil, conformance
for name in sorted(m.name for m in pkgutil.walk_packages(conformance.__path__, "conformance.")
                   if not m.name.endswith("__main__")):
    try:
        importlib.import_module(name)
    except Exception:
        pass
from hypothesis.internal.conjecture import providers
found = providers._get_local_constants()
print("integers", sorted(found.integers))
print("floats", sorted(found.floats))
'''
WITHOUT_CONSTANTS = '''from hypothesis.internal.conjecture import providers
providers._get_local_constants = lambda: providers._local_constants  # never filled: empty
'''


@dataclass(frozen=True)
class Context:
    """Where the code under test lives and where this run writes."""

    checkout: Path
    tmp: Path
    env: dict[str, str]
    seed: int
    generated: int
    local_constants: bool

    @property
    def paths(self) -> dict[str, str]:
        return {str(self.tmp): "<tmp>", str(self.checkout): "<checkout>"}

    @property
    def worker_log(self) -> Path:
        return self.tmp / "workers.log"


@dataclass(frozen=True)
class Output:
    """One saved output: its name, the CLI arguments, whether it is JSON, and where it runs."""

    name: str
    args: tuple[str, ...]
    json_file: Optional[str] = None  # the report it writes, relative to cwd in the temporary directory; None: stdout
    cwd: Optional[str] = None  # relative to the temporary directory; None: the checkout


def _wrapper(ctx: Context, name: str, python: Path) -> Path:
    wrapper = ctx.tmp / f"{name}-python"
    wrapper.write_text(f'#!/bin/sh\nexec "{python}" "{ctx.tmp / "bootstrap.py"}" '
                       f'"{ctx.checkout}" "{ctx.worker_log}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _pythons(checkout: Path, given: Mapping[str, Optional[str]]) -> dict[str, Path]:
    """Each own environment's python: given, else ``CONFORMANCE_<NAME>_PYTHON``, else the checkout's venv."""
    found = {}
    for name, venv in OWN_ENVIRONMENTS.items():
        python = given.get(name) or os.environ.get(f"CONFORMANCE_{name.upper()}_PYTHON")
        found[name] = Path(python or checkout / venv / "bin" / "python")
        if not os.access(found[name], os.X_OK):
            raise Failure(f"{found[name]} is not a python; `make setup-frameworks` creates it "
                          f"(or pass --{name}-python)")
    return found


def make_context(checkout: Path, *, seed: int, generated: int, pythons: Mapping[str, Optional[str]],
                 local_constants: bool = True) -> Context:
    """A temporary directory holding the worker wrappers, and the environment every command gets.

    Without ``local_constants``, a ``sitecustomize`` stops hypothesis drawing the source's literals.
    """
    found = _pythons(checkout, pythons)
    tmp = Path(tempfile.mkdtemp(prefix="unchanged-")).resolve()
    (tmp / "bootstrap.py").write_text(BOOTSTRAP)
    path = str(checkout)
    if not local_constants:
        (tmp / "site").mkdir()
        (tmp / "site" / "sitecustomize.py").write_text(WITHOUT_CONSTANTS)
        path = f"{tmp / 'site'}{os.pathsep}{checkout}"
    env = {**os.environ, "PYTHONHASHSEED": "0", "COLUMNS": WIDTH, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": path}
    ctx = Context(checkout, tmp, env, seed, generated, local_constants)
    for name, python in found.items():
        env[f"CONFORMANCE_{name.upper()}_PYTHON"] = str(_wrapper(ctx, name, python))
    return ctx


def outputs(ctx: Context, dumps: Sequence[Dump]) -> list[Output]:
    """Every output of the proof, with explicit seeds."""
    seed = ("--seed", str(ctx.seed))
    run = ("run", *seed, "--results-dir")
    result = [
        Output("conformance", (*run, str(ctx.tmp / "results"), "--json", str(ctx.tmp / "conformance.json"),
                               "--junit", str(ctx.tmp / "junit.xml")), "conformance.json"),
        Output("conformance-all", (*run, str(ctx.tmp / "results-all"), "--backend", ALL_BACKENDS, "--json",
                                   str(ctx.tmp / "conformance-all.json"), "--junit", str(ctx.tmp / "junit-all.xml")),
               "conformance-all.json"),
        Output("selftest-generated", ("selftest", "--generated", str(ctx.generated), *seed)),
        Output("hypothesis-local-constants", ("-c", CONSTANTS), cwd="."),
    ]
    for dump in dumps:
        result.append(Output(f"compare-{dump.name}", ("compare", *dump.args, "--json", "report.json"),
                             "report.json", cwd=f"dumps/{dump.name}"))
    result.append(Output("compare-msprobe-leaky3", ("compare", "--msprobe", "leaky3", "--json", "report.json"),
                         "report.json", cwd="msprobe"))
    return result


def run_output(ctx: Context, out: Output) -> tuple[dict, float]:
    """Run one command of the checkout; its normalised record and its wall time."""
    cwd = ctx.checkout if out.cwd is None else ctx.tmp / out.cwd
    start = time.perf_counter()
    argv = out.args if out.args[0] == "-c" else ("-m", "conformance", *out.args)
    done = subprocess.run([sys.executable, *argv], cwd=cwd, env=ctx.env,
                          capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise Failure(f"{out.name} exited {done.returncode}: {last}")
    if out.json_file is None:
        lines = [normalise_text(line.rstrip(), paths=ctx.paths) for line in done.stdout.splitlines()]
        return {"exit": done.returncode, "stdout": lines}, took
    report = json.loads((ctx.tmp / (out.cwd or ".") / out.json_file).read_text())
    return {"exit": done.returncode, "report": normalise(report, paths=ctx.paths)}, took


def _code_under_test(ctx: Context) -> None:
    """Print where the main process and each worker found ``conformance``; stop if outside the checkout."""
    main = subprocess.run([sys.executable, "-c", "import conformance; print(conformance.__file__)"], cwd=ctx.tmp,
                          env=ctx.env, capture_output=True, text=True).stdout.strip()
    workers = sorted(set(ctx.worker_log.read_text().split())) if ctx.worker_log.exists() else []
    for where in [main, *workers]:
        print(f"code under test: {where}")
        if not Path(where).resolve().is_relative_to(ctx.checkout):
            raise Failure(f"{where} is not in the checkout {ctx.checkout}")
    if not workers:
        raise Failure("no paddle/mindspore worker logged its code; the wrapper was not used")


def run_all(ctx: Context, todo: Sequence[Output], *, jobs: int) -> dict[str, dict]:
    """Every output, ``jobs`` commands at a time, each line printed as it ends."""
    def one(out: Output) -> tuple[str, dict]:
        record, took = run_output(ctx, out)
        print(f"  ran {out.name} (exit {record['exit']}) in {took:.0f} s", flush=True)
        return out.name, record

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return dict(pool.map(one, todo))


def _checkout_backends(checkout: Path) -> None:
    makefile = checkout / "Makefile"
    found = re.search(r"^ALL_BACKENDS \?= (\S+)", makefile.read_text(), re.M) if makefile.exists() else None
    if found and found.group(1) != ALL_BACKENDS:
        print(f"note: the checkout's Makefile sets ALL_BACKENDS={found.group(1)}; the proof runs {ALL_BACKENDS}")


# ----------------------------------------------------------------------------- save and check

def _record(ctx: Context, stored: Path, *, jobs: int) -> tuple[dict[str, str], dict[str, dict]]:
    """Make the inputs, run every output; the inputs' hashes and the records."""
    dumps = defect_dumps()
    hashes = write_dumps(dumps, ctx.tmp / "dumps")
    shutil.copytree(stored, ctx.tmp / "msprobe" / "leaky3")
    hashes["msprobe/leaky3"] = tree_sha256(stored)
    _checkout_backends(ctx.checkout)
    records = run_all(ctx, outputs(ctx, dumps), jobs=jobs)
    _code_under_test(ctx)
    return hashes, records


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def save(directory: Path, ctx: Context, *, jobs: int) -> int:
    fixture = ctx.checkout / MSPROBE_FIXTURE
    if not fixture.is_dir():
        raise Failure(f"{fixture} is missing; run save in a checkout that has it")
    hashes, records = _record(ctx, fixture, jobs=jobs)
    directory.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(directory / "msprobe-leaky3", ignore_errors=True)
    shutil.copytree(fixture, directory / "msprobe-leaky3")
    _write_json(directory / "meta.json", {"seed": ctx.seed, "generated": ctx.generated, "backends": ALL_BACKENDS,
                                          "local_constants": ctx.local_constants, "outputs": list(records)})
    _write_json(directory / "inputs.json", hashes)
    for name, record in records.items():
        _write_json(directory / f"{name}.json", record)
        print(f"{name}: saved (exit {record['exit']})")
    return 0


def compare_saved(directory: Path, hashes: Mapping[str, str], records: Mapping[str, dict]) -> list[tuple[str, str]]:
    """One (name, verdict) per saved output, the inputs first; verdict "identical" or "differs: <path>"."""
    lines = [("inputs", _verdict(json.loads((directory / "inputs.json").read_text()), dict(hashes)))]
    for name in json.loads((directory / "meta.json").read_text())["outputs"]:
        saved = json.loads((directory / f"{name}.json").read_text())
        lines.append((name, _verdict(saved, records[name]) if name in records else "differs: not produced"))
    return lines


def _verdict(old: Any, new: Any) -> str:
    found = first_difference(old, new)
    return "identical" if found is None else f"differs: {found}"


def _read(directory: Path, name: str) -> Any:
    return json.loads((directory / name).read_text())


def _report(lines: Sequence[tuple[str, str]]) -> int:
    for name, verdict in lines:
        print(f"{name}: {verdict}")
    return 0 if all(v == "identical" for _, v in lines) else 1


def check(directory: Path, ctx: Context, *, jobs: int) -> int:
    hashes, records = _record(ctx, directory / "msprobe-leaky3", jobs=jobs)
    return _report(compare_saved(directory, hashes, records))


def diff(directory: Path, other: Path) -> int:
    """``check`` against a second saved directory instead of a fresh run (both saved, e.g. at once)."""
    for meta in (directory / "meta.json", other / "meta.json"):
        if not meta.is_file():
            raise Failure(f"{meta} does not exist; run `save {meta.parent}` first")
    settings = [{k: v for k, v in _read(d, "meta.json").items() if k != "outputs"} for d in (directory, other)]
    records = {name: _read(other, f"{name}.json") for name in _read(other, "meta.json")["outputs"]}
    lines = compare_saved(directory, _read(other, "inputs.json"), records)
    return _report([("settings", _verdict(*settings)), *lines])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.unchanged", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "check", "diff"))
    parser.add_argument("directory", type=Path, metavar="DIR")
    parser.add_argument("other", type=Path, nargs="?", metavar="OTHER", help="diff: a second saved DIR")
    parser.add_argument("--checkout", type=Path, default=Path.cwd(), help="the code under test (default: here)")
    parser.add_argument("--jobs", type=int, default=3, help="commands run at once (default 3)")
    parser.add_argument("--without-local-constants", action="store_true",
                        help="save: hypothesis draws no literals of the source (kept in DIR for check)")
    for name in OWN_ENVIRONMENTS:
        parser.add_argument(f"--{name}-python", help=f"python of the {name} environment")
    return parser


def _settings(args: argparse.Namespace) -> tuple[int, int, bool]:
    if args.action == "save":
        return SEED, GENERATED, not args.without_local_constants
    meta = args.directory / "meta.json"
    if not meta.is_file():
        raise Failure(f"{meta} does not exist; run `save {args.directory}` first")
    saved = json.loads(meta.read_text())
    return saved["seed"], saved["generated"], saved.get("local_constants", True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _main(args)
    except Failure as error:
        print(f"unchanged: {error}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    if args.action == "diff":
        if args.other is None:
            raise Failure("diff needs two saved directories: diff DIR OTHER")
        return diff(args.directory, args.other)
    checkout = args.checkout.resolve()
    if not (checkout / "conformance" / "__init__.py").is_file():
        raise Failure(f"{checkout} is not a checkout of conformance; run from its root or pass --checkout")
    seed, generated, local_constants = _settings(args)
    ctx = make_context(checkout, seed=seed, generated=generated, local_constants=local_constants,
                       pythons={n: getattr(args, f"{n}_python") for n in OWN_ENVIRONMENTS})
    action: Callable[..., int] = save if args.action == "save" else check
    start = time.perf_counter()
    try:
        code = action(args.directory.resolve(), ctx, jobs=args.jobs)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    print(f"{args.action} took {time.perf_counter() - start:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
