"""The one bridge from NoneBot's plugin modules to the object graph bot.py builds.

NoneBot imports plugins as modules, so they cannot take constructor arguments; bot.py (or
a test) installs the runtime here before loading them.
"""

from __future__ import annotations

from pallas.app import Runtime

_installed: list[Runtime] = []


def install_runtime(runtime: Runtime) -> None:
    _installed[:] = [runtime]


def current_runtime() -> Runtime:
    if not _installed:
        raise RuntimeError("no Pallas runtime installed; start the bot with bot.py")
    return _installed[0]
