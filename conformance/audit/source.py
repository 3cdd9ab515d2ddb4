"""Python source: every LeakyReLU, PReLU and RReLU construction or call, found by reading the AST.

Nothing is imported or executed.  Import aliases are followed
(``import torch.nn as nn``, ``from torch.nn import functional as F``,
``from keras import layers``, ``from tensorflow import keras``, ...); a name
that was never imported is read as written, with ``tf`` taken as TensorFlow.
A slope that is not a constant expression is reported as dynamic.

PReLU and RReLU are read with the arguments that shape them, by their signatures:

- ``torch.nn.PReLU(num_parameters=1, init=0.25, device=None, dtype=None)`` and
  ``torch.nn.RReLU(lower=1/8, upper=1/3, inplace=False)`` (``torch/nn/modules/activation.py``);
- ``torch.nn.functional.prelu(input, weight)`` (a weight tensor: its slope is always dynamic) and
  ``torch.nn.functional.rrelu(input, lower=1/8, upper=1/3, training=False, inplace=False)``
  (``torch/nn/functional.py``);
- ``keras.layers.PReLU(alpha_initializer="Zeros", alpha_regularizer=None, alpha_constraint=None,
  shared_axes=None)`` (``keras/src/layers/activations/prelu.py``).

A PReLU's slope is the value its weight starts from; an RReLU's its eval slope (lower + upper) / 2.

Only regular files are read (a FIFO or device named ``*.py`` is skipped with a
note, never opened for a blocking read); a file nested too deeply for the
parser, or a slope literal too large for a float, is one line of error (a
skipped note in a directory).
"""
from __future__ import annotations

import ast
import operator
import os
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Optional

from conformance.audit.record import Activation, dynamic, from_default, with_value
from conformance.errors import UsageError
from conformance.ops import RRELU_LOWER, RRELU_UPPER

#: Qualified name (after aliases) -> the defaults table's API.
_APIS = {
    "torch.nn.LeakyReLU": "torch.nn.LeakyReLU",
    "torch.nn.modules.LeakyReLU": "torch.nn.LeakyReLU",
    "torch.nn.modules.activation.LeakyReLU": "torch.nn.LeakyReLU",
    "torch.nn.functional.leaky_relu": "torch.nn.functional.leaky_relu",
    "torch.nn.functional.leaky_relu_": "torch.nn.functional.leaky_relu",
    "tensorflow.nn.leaky_relu": "tf.nn.leaky_relu",
    "tensorflow.compat.v1.nn.leaky_relu": "tf.nn.leaky_relu",
    "keras.layers.LeakyReLU": "keras.layers.LeakyReLU",
    "tensorflow.keras.layers.LeakyReLU": "keras.layers.LeakyReLU",
    "tf_keras.layers.LeakyReLU": "keras.layers.LeakyReLU",
    "keras.ops.leaky_relu": "keras.ops.leaky_relu",
    "keras.activations.leaky_relu": "keras.ops.leaky_relu",
    "tensorflow.keras.activations.leaky_relu": "keras.ops.leaky_relu",
    "mindspore.nn.LeakyReLU": "mindspore.nn.LeakyReLU",
    "mindspore.ops.leaky_relu": "mindspore.ops.leaky_relu",
    "mindspore.ops.function.leaky_relu": "mindspore.ops.leaky_relu",
    "jax.nn.leaky_relu": "jax.nn.leaky_relu",
    "flax.linen.leaky_relu": "jax.nn.leaky_relu",
    "paddle.nn.LeakyReLU": "paddle.nn.LeakyReLU",
    "paddle.nn.functional.leaky_relu": "paddle.nn.functional.leaky_relu",
    "torch.nn.PReLU": "torch.nn.PReLU",
    "torch.nn.modules.PReLU": "torch.nn.PReLU",
    "torch.nn.modules.activation.PReLU": "torch.nn.PReLU",
    "torch.nn.functional.prelu": "torch.nn.functional.prelu",
    "torch.nn.RReLU": "torch.nn.RReLU",
    "torch.nn.modules.RReLU": "torch.nn.RReLU",
    "torch.nn.modules.activation.RReLU": "torch.nn.RReLU",
    "torch.nn.functional.rrelu": "torch.nn.functional.rrelu",
    "torch.nn.functional.rrelu_": "torch.nn.functional.rrelu",
    "keras.layers.PReLU": "keras.layers.PReLU",
    "tensorflow.keras.layers.PReLU": "keras.layers.PReLU",
    "tf_keras.layers.PReLU": "keras.layers.PReLU",
}
_CONVENTIONAL = {"tf": "tensorflow"}  # used only when the file never binds the name
_SLOPE_KEYWORDS = ("negative_slope", "alpha")
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
               ast.Div: operator.truediv, ast.Pow: operator.pow}


def python_files(path: Path) -> list[Path]:
    """``path`` itself, or every ``.py`` under a directory (hidden and venv directories skipped)."""
    if not path.is_dir():
        return [path]
    skip = {".git", ".venv", "venv", "__pycache__", "node_modules"}
    return sorted(p for p in path.rglob("*.py") if not skip.intersection(p.relative_to(path).parts[:-1]))


def aliases(tree: ast.Module) -> dict[str, str]:
    """Each name the file binds by import -> the dotted name it stands for."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                found[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                found[a.asname or a.name] = f"{node.module}.{a.name}"
    return found


def dotted(node: ast.AST, *, names: dict[str, str]) -> Optional[str]:
    """``a.b.c`` of a Name/Attribute chain with its first name resolved through ``names``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    head = names.get(node.id, _CONVENTIONAL.get(node.id, node.id))
    return ".".join([head, *reversed(parts)])


def constant(node: ast.AST) -> Optional[float]:
    """The value of a numeric constant expression (``0.2``, ``-1/3``, ``2e-1``); None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        try:
            return float(node.value)
        except OverflowError:
            raise UsageError(f"line {node.lineno}: the literal {str(node.value)[:20]}... is too large for a "
                             "float; a slope must be a float") from None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = constant(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = constant(node.left), constant(node.right)
        try:
            return None if left is None or right is None else float(_ARITHMETIC[type(node.op)](left, right))
        except (ZeroDivisionError, OverflowError):
            return None
    return None


def slope_argument(call: ast.Call, *, api: str) -> Optional[ast.AST]:
    """The slope's expression: a keyword, else its position (0 for a layer class, 1 for a function
    that takes x first); a ``**kwargs`` may carry it (returned as such); None when absent."""
    named = next((kw.value for kw in call.keywords if kw.arg in _SLOPE_KEYWORDS), None)
    position = 0 if api.rsplit(".", 1)[-1][0].isupper() else 1
    return named if named is not None else argument(call, name=_SLOPE_KEYWORDS[0], position=position)


PRELU, PRELU_CALL, RRELU, RRELU_CALL = ("torch.nn.PReLU", "torch.nn.functional.prelu", "torch.nn.RReLU",
                                        "torch.nn.functional.rrelu")
KERAS_PRELU = "keras.layers.PReLU"

#: api -> (name, position) of its slope's arguments, then of the other arguments an audit shows.
SIGNATURES: dict[str, tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]] = {
    PRELU: ((("init", 1),), (("num_parameters", 0),)),
    PRELU_CALL: ((("weight", 1),), ()),
    RRELU: ((("lower", 0), ("upper", 1)), ()),
    RRELU_CALL: ((("lower", 1), ("upper", 2)), (("training", 3),)),
    KERAS_PRELU: ((("alpha_initializer", 0),), (("shared_axes", 3),)),
}
#: The fill value of Keras's constant initializers, by name (``keras/src/initializers/constant_initializers.py``).
INITIALIZERS = {"zeros": 0.0, "ones": 1.0}


def argument(call: ast.Call, *, name: str, position: int) -> Optional[ast.AST]:
    """An argument's expression: its keyword, else its position; a ``*args``/``**kwargs`` that may carry
    it (returned as such); None when absent."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if not any(isinstance(a, ast.Starred) for a in call.args) and len(call.args) > position:
        return call.args[position]
    splats = [a for a in call.args if isinstance(a, ast.Starred)] + [kw.value for kw in call.keywords if kw.arg is None]
    return splats[0] if splats else None


def _shown(call: ast.Call, *, api: str) -> tuple[str, ...]:
    """The other arguments of ``call`` that shape it, as written (``num_parameters=3``)."""
    found = ((name, argument(call, name=name, position=p)) for name, p in SIGNATURES[api][1])
    return tuple(f"{name}={ast.unparse(node)}" for name, node in found if node is not None)


def from_call(call: ast.Call, *, api: str, where: str) -> Activation:
    """A PReLU or RReLU call of the source, with its slope and the arguments that shape it."""
    (slope, *rest), _ = SIGNATURES[api]
    nodes = [argument(call, name=n, position=p) for n, p in (slope, *rest)]
    if api in (RRELU, RRELU_CALL):
        found = _rrelu_call(nodes[0], nodes[1], where=where, api=api)
    elif api == PRELU_CALL:  # the weight is a tensor, and has no default
        found = dynamic("(no weight)" if nodes[0] is None else ast.unparse(nodes[0]), where=where, api=api)
    elif nodes[0] is None:
        found = from_default(where=where, api=api)
    else:
        value = constant(nodes[0]) if api == PRELU else _initial(nodes[0])
        found = dynamic(ast.unparse(nodes[0]), where=where, api=api) if value is None else \
            with_value(value, where=where, api=api)
    return replace(found, arguments=_shown(call, api=api))


def _rrelu_call(lower: Optional[ast.AST], upper: Optional[ast.AST], *, where: str, api: str) -> Activation:
    """An RReLU's eval slope from its bounds as written (each absent one torch's default)."""
    if lower is None and upper is None:
        return replace(from_default(where=where, api=api), bounds=(RRELU_LOWER, RRELU_UPPER))
    values = [RRELU_LOWER if lower is None else constant(lower), RRELU_UPPER if upper is None else constant(upper)]
    if values[0] is None or values[1] is None:
        written = ", ".join(f"{n}={ast.unparse(v)}" for n, v in (("lower", lower), ("upper", upper)) if v is not None)
        return dynamic(written, where=where, api=api)
    return replace(with_value((values[0] + values[1]) / 2, where=where, api=api), bounds=(values[0], values[1]))


def _initial(node: ast.AST) -> Optional[float]:
    """The value a Keras initializer written as ``"zeros"``, ``Zeros()`` or ``Constant(0.25)`` fills with."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return INITIALIZERS.get(node.value.lower())
    if not isinstance(node, ast.Call):
        return None
    func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if func.lower() in INITIALIZERS:
        return INITIALIZERS[func.lower()]
    value = argument(node, name="value", position=0) if func.lower() == "constant" else None
    return None if value is None else constant(value)


def _activation(call: ast.Call, *, api: str, where: str) -> Activation:
    if api in SIGNATURES:
        return from_call(call, api=api, where=where)
    arg = slope_argument(call, api=api)
    if arg is None:
        return from_default(where=where, api=api)
    value = constant(arg)
    if value is None:
        return dynamic(ast.unparse(arg), where=where, api=api)
    return with_value(value, where=where, api=api)


def _scopes(tree: ast.Module) -> dict[int, str]:
    """``id(call node)`` -> the qualified name of the class/function around it."""
    scope: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}.{child.name}" if prefix else child.name
            if isinstance(child, ast.Call):
                scope[id(child)] = prefix
            visit(child, name)

    visit(tree, "")
    return scope


def scan(text: str, *, filename: str) -> list[Activation]:
    """Every LeakyReLU of one file's source text, in source order."""
    try:
        return list(_scan(ast.parse(text, filename=filename), filename=filename))
    except SyntaxError as exc:
        raise UsageError(f"{filename}:{exc.lineno}: not valid Python ({exc.msg}); "
                         "fix it or audit another target") from None
    except (RecursionError, MemoryError):
        raise UsageError(f"{filename}: nested too deeply to read (an expression of thousands of terms?); "
                         "simplify it or audit another target") from None
    except UsageError as exc:
        raise UsageError(f"{filename}: {exc}") from None


def _scan(tree: ast.Module, *, filename: str) -> Iterator[Activation]:
    names, scopes = aliases(tree), _scopes(tree)
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        api = _APIS.get(dotted(call.func, names=names) or "")
        if api is not None:
            scope = scopes.get(id(call), "")
            where = f"{filename}:{call.lineno}" + (f" ({scope})" if scope else "")
            yield _activation(call, api=api, where=where)


def read_source(file: Path) -> str:
    """A regular file's UTF-8 text; opened without blocking, so a FIFO is refused, not waited on."""
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise UsageError(f"{file}: cannot open it ({exc.strerror or type(exc).__name__})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{file}: not a regular file (a FIFO, socket or device); pass a .py file")
        try:
            return handle.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{file}: cannot read it as UTF-8 text ({type(exc).__name__})") from None


def audit_source(path: Path) -> tuple[list[Activation], tuple[str, ...]]:
    """Every LeakyReLU in a ``.py`` file or a directory of them, and notes on skipped files.

    A single file that cannot be read or parsed is an input error; in a directory it is skipped
    and named in a note, so one broken file does not hide the rest."""
    found: list[Activation] = []
    skipped: list[str] = []
    for file in python_files(path):
        try:
            found.extend(scan(read_source(file), filename=str(file)))
        except UsageError as exc:
            if not path.is_dir():
                raise
            skipped.append(str(exc))
    return found, tuple(f"skipped {line}" for line in skipped)
