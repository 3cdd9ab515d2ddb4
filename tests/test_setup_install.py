"""``tools/install.py``: ``make setup``'s install, with uv under pip's own settings, else pip."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def install() -> ModuleType:
    spec = importlib.util.spec_from_file_location("setup_install", ROOT / "tools" / "install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LISTING = """\
:env:.find-links='/env/wheels'
freeze.find-links='/not/for/install'
global.extra-index-url='file:///a/simple file:///b/simple'
global.find-links='/global/wheels'
global.constraint='/global/c.txt'
install.constraint='/install/c.txt'
"""


def test_pip_settings_take_the_environment_over_install_over_global(install: ModuleType):
    settings = install.pip_settings(LISTING)
    assert settings == {"find-links": "/env/wheels", "extra-index-url": "file:///a/simple file:///b/simple",
                        "constraint": "/install/c.txt"}


def test_uv_is_given_every_index_find_links_and_constraint_pip_uses(install: ModuleType):
    arguments, environment = install.uv_arguments(install.pip_settings(LISTING))
    pairs = set(zip(arguments[::2], arguments[1::2]))
    assert pairs == {("--index-strategy", "unsafe-best-match"), ("--find-links", "/env/wheels"),
                     ("--extra-index-url", "file:///a/simple"), ("--extra-index-url", "file:///b/simple"),
                     ("--constraints", "/install/c.txt")}
    assert environment == {}


@pytest.mark.parametrize(("setting", "value", "expected"), [
    ("index-url", "https://mirror/simple", ["--default-index", "https://mirror/simple"]),
    ("no-index", "yes", ["--no-index"]),
    ("no-index", "0", []),
    ("trusted-host", "a.example b.example", ["--allow-insecure-host", "a.example", "--allow-insecure-host",
                                             "b.example"]),
    ("pre", "true", ["--prerelease", "allow"]),
    ("only-binary", "numpy,scipy", ["--only-binary", "numpy", "--only-binary", "scipy"]),
    ("disable-pip-version-check", "1", []),
])
def test_each_pip_setting_becomes_its_uv_argument(install: ModuleType, setting: str, value: str, expected):
    arguments, _ = install.uv_arguments({setting: value})
    assert arguments[2:] == expected


def test_certificates_and_timeouts_go_to_uv_through_its_environment(install: ModuleType):
    _, environment = install.uv_arguments({"cert": "/etc/ca.pem", "default-timeout": "180"})
    assert environment == {"SSL_CERT_FILE": "/etc/ca.pem", "UV_HTTP_TIMEOUT": "180"}


def test_a_pip_setting_uv_cannot_follow_means_pip(install: ModuleType):
    with pytest.raises(install.NoUv, match="'prefix'"):
        install.uv_arguments({"prefix": "/opt/elsewhere"})


def test_the_settings_are_pips_own_from_its_files_and_environment(install: ModuleType, tmp_path: Path):
    config = tmp_path / "pip.conf"
    config.write_text("[install]\nconstraint = /from/file.txt\n")
    env = {**os.environ, "PIP_CONFIG_FILE": str(config), "PIP_FIND_LINKS": "/from/env"}
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], env=env, capture_output=True,
                             text=True, check=True).stdout
    settings = install.pip_settings(listing)
    assert settings["constraint"] == "/from/file.txt"
    assert settings["find-links"] == "/from/env"


def _record(calls: list[str], name: str, failure: BaseException | None = None):
    def step(*args, **kwargs) -> None:
        calls.append(name)
        if failure is not None:
            raise failure
    return step


def test_a_config_line_that_cannot_be_read_means_pip(install: ModuleType):
    with pytest.raises(install.NoUv, match="cannot be read"):
        install.pip_settings("global.index-url=https://unquoted\n")


def test_ctrl_c_during_the_install_is_one_line_and_exit_130(install: ModuleType, monkeypatch, capsys):
    monkeypatch.setattr(install, "install_with_uv", _record([], "uv", KeyboardInterrupt()))
    assert install.main(["--", "-e", "."]) == 130
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_when_uv_fails_pip_installs_and_one_line_says_why(install: ModuleType, monkeypatch, capsys):
    calls: list[str] = []
    monkeypatch.setattr(install, "install_with_uv", _record(calls, "uv", install.NoUv("uv failed")))
    monkeypatch.setattr(install, "install_with_pip", _record(calls, "pip"))
    assert install.main(["--", "-e", "."]) == 0
    assert calls == ["uv", "pip"]
    assert capsys.readouterr().err == "set-up: uv failed; installing with pip\n"


def test_uv_installing_is_the_whole_install(install: ModuleType, monkeypatch, capsys):
    calls: list[str] = []
    monkeypatch.setattr(install, "install_with_uv", _record(calls, "uv"))
    monkeypatch.setattr(install, "install_with_pip", _record(calls, "pip"))
    assert install.main(["--", "-e", "."]) == 0
    assert calls == ["uv"] and capsys.readouterr().err == ""


def test_installer_pip_never_tries_uv(install: ModuleType, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(install, "install_with_uv", _record(calls, "uv"))
    monkeypatch.setattr(install, "install_with_pip", _record(calls, "pip"))
    assert install.main(["--installer", "pip", "--", "-e", "."]) == 0
    assert calls == ["pip"]


def test_a_failing_pip_is_exit_2_with_one_line(install: ModuleType, monkeypatch, capsys):
    monkeypatch.setattr(install, "install_with_pip", _record([], "pip", subprocess.CalledProcessError(1, "pip")))
    assert install.main(["--installer", "pip", "--", "-e", "."]) == 2
    assert capsys.readouterr().err == "set-up: pip install failed (exit 1); see its messages above\n"


def test_uv_on_the_path_is_used_without_installing_it(install: ModuleType, monkeypatch, tmp_path: Path):
    monkeypatch.setattr(install.shutil, "which", lambda name: "/usr/local/bin/uv" if name == "uv" else None)
    monkeypatch.setattr(install.subprocess, "run", _record([], "pip", AssertionError("pip was run")))
    assert install.find_uv(sys.executable, home=tmp_path) == "/usr/local/bin/uv"


def test_uv_that_pip_cannot_install_means_pip(install: ModuleType, monkeypatch, tmp_path: Path):
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    monkeypatch.setattr(install.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1))
    with pytest.raises(install.NoUv, match="could not install"):
        install.find_uv(sys.executable, home=tmp_path)


def test_uv_runs_without_its_own_configuration_and_with_pips_settings(install: ModuleType, monkeypatch,
                                                                       tmp_path: Path):
    """uv reads nothing pip would not: ``--no-config``, no ``UV_*`` variable but its cache, and pip's
    certificate and timeout through the variables uv reads for them."""
    listing = "global.cert='/etc/corp.pem'\ninstall.timeout='40'\nglobal.index-url='https://mirror.example/simple'\n"
    runs = []

    def run(command, **kwargs):
        runs.append((command, kwargs))
        return subprocess.CompletedProcess(command, 0, stdout=listing if "config" in command else "")

    monkeypatch.setattr(install.subprocess, "run", run)
    monkeypatch.setattr(install, "find_uv", lambda python, *, home: "/opt/uv")
    monkeypatch.setenv("UV_INDEX_URL", "https://uv-only.example/simple")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "cache"))
    install.install_with_uv(sys.executable, ["numpy"], home=tmp_path)
    command, kwargs = runs[-1]
    assert command[:3] == ["/opt/uv", "pip", "install"] and "--no-config" in command
    assert "https://mirror.example/simple" in command and command[-1] == "numpy"
    env = kwargs["env"]
    assert "UV_INDEX_URL" not in env and env["UV_CACHE_DIR"] == str(tmp_path / "cache")
    assert env["SSL_CERT_FILE"] == "/etc/corp.pem" and env["UV_HTTP_TIMEOUT"] == "40"
