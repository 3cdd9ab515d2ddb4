"""One exception root: every exception the package defines is in errors.py, under ConformanceError."""
from __future__ import annotations

import ast
import inspect

import pytest

from conformance import errors
from tests.test_import_graph import module_names

#: Each class and the built-in its callers catch it as.
BUILTIN_BASES = {
    "UsageError": Exception, "BackendUnavailable": errors.UsageError, "Unsupported": Exception,
    "CorpusError": ValueError, "UnknownCategory": ValueError, "HostValidationError": ValueError,
    "MissingInstruction": RuntimeError, "GmFault": RuntimeError, "UbOverflowError": MemoryError,
    "ProtocolError": Exception, "WorkerFailure": Exception, "PoolFailure": RuntimeError, "RemoteTraceback": Exception,
}


def _defined_errors() -> list[tuple[str, str]]:
    """(module, class) of every class outside errors.py whose base names an Error or Exception."""
    found = []
    for name, path in module_names().items():
        if name == "conformance.errors":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith(("Error", "Exception"))
                                                      for b in node.bases):
                found.append((name, node.name))
    return found


def test_no_exception_is_defined_outside_errors_py() -> None:
    assert _defined_errors() == []


@pytest.mark.parametrize("name", sorted(BUILTIN_BASES))
def test_each_error_is_under_the_root_and_keeps_its_builtin_base(name: str) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, errors.ConformanceError) and issubclass(cls, BUILTIN_BASES[name])


def test_errors_py_defines_exactly_the_listed_classes() -> None:
    defined = {n for n, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__}
    assert defined == {"ConformanceError", *BUILTIN_BASES}


def test_one_line_names_the_type_and_keeps_the_first_line() -> None:
    from conformance.errors import one_line

    assert one_line(ValueError("bad value\nmore detail")) == "ValueError: bad value"
    assert one_line(KeyError()) == "KeyError"
    assert one_line(SystemExit(3)) == "sys.exit(3)"
    assert one_line(ValueError("x" * 300)) == "ValueError: " + "x" * 200


def test_one_line_unnamed_joins_the_text_or_names_the_type() -> None:
    from conformance.errors import one_line

    assert one_line(OSError("cannot\n  read   it"), named=False) == "cannot read it"
    assert one_line(ValueError(), named=False) == "ValueError"


def test_an_exit_that_words_itself_keeps_its_words() -> None:
    from conformance.errors import one_line
    from conformance.interrupts import ProcessExit

    assert one_line(ProcessExit(4)) == "os._exit(4)"
