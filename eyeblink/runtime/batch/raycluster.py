"""The Ray cluster as ``eyeblink batch`` (:mod:`eyeblink.runtime.batch.driver`) uses it: importing
and joining it, the signal handlers ``ray.init`` would replace, and Ray's own messages and notices
turned into the user's one line.

``ray`` is imported only by :func:`import_ray` (extra ``eyeblink[ray]``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from eyeblink.closing import Closing
from eyeblink.errors import ConfigError, MissingExtraError

__all__ = [
    "RayLogLevel",
    "RayMessages",
    "import_ray",
    "join",
    "keeps_the_sigterm_handler",
    "notices_silenced",
    "python_signal_handlers",
    "restore_signal_handlers",
]


def join(ray: Any, address: str) -> None:
    """``ray.init`` of the cluster at ``address``; a cluster that cannot be joined is a one-line
    :class:`~eyeblink.errors.ConfigError` naming the likely fix (Ray raises a chain of tracebacks).
    """
    try:
        ray.init(address=address, configure_logging=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ray.exceptions.RayError) as exc:
        text = " ".join(str(e) for e in (exc, exc.__cause__, exc.__context__) if e is not None)
        if "InvalidAuthToken" in text or "uthentication" in text:
            mode = os.environ.get("RAY_AUTH_MODE", "not set")
            raise ConfigError(
                f"cannot join the Ray cluster at {address}: it asks for an authentication token "
                f"(RAY_AUTH_MODE is {mode}); export RAY_AUTH_MODE=token and give this machine the "
                "head's token (~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN)"
            ) from None
        raise ConfigError(
            f"cannot join the Ray cluster at {address} ({str(exc).splitlines()[0][:200]}); check "
            "the "
            "address (ray start --head prints it) and that the head is running"
        ) from None


def python_signal_handlers() -> dict[int, Any]:
    import signal

    return {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}


@contextlib.contextmanager
def keeps_the_sigterm_handler(ray: Any) -> Iterator[None]:
    """``ray.init`` without its SIGTERM handler (``sys.exit(15)``: a stop while Ray starts would end
    the batch with exit status 15 and no summary): eyeblink's stays (:mod:`eyeblink.stopping`, held
    while Ray starts)."""
    utils: Any = getattr(getattr(ray, "_private", None), "utils", None)
    original = getattr(utils, "set_sigterm_handler", None)
    if utils is None or original is None:
        yield
        return
    utils.set_sigterm_handler = lambda _handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = original


def restore_signal_handlers(handlers: dict[int, Any]) -> None:
    """Put back the Python handlers (``eyeblink`` treats SIGTERM as Ctrl-C) that ``ray.init``
    replaced."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for sig, handler in handlers.items():
        # again at the OS level too: a C++ handler is invisible to getsignal
        if handler is not None:
            signal.signal(sig, handler)


class RayLogLevel(Closing):
    """The ``ray`` logger's level while a batch runs; :meth:`close` restores it."""

    def __init__(self, level: int | None) -> None:
        import logging

        self.logger = logging.getLogger("ray")
        self.saved = self.logger.level
        if level is not None:
            self.logger.setLevel(level)

    def close(self) -> None:
        self.logger.setLevel(self.saved)


class RayMessages(Closing):
    """What a Ray cluster tells the driver about its failures, as the user should read it.

    Ray's driver prints every error the cluster publishes
    (``ray._private.worker.listen_error_messages``) to stdout: a dead raylet's last 20 log lines of
    internal state, the node's death, each retried task, dozens of lines per lost node. While a
    batch runs, each such message goes whole to the ``eyeblink.ray`` logger (the ``--log-file``, at
    INFO) and, on stderr, becomes one line: ``node ... lost`` once per node, ``a task was lost with
    its node; retrying it`` per retried task, and the first line of anything else. :meth:`close`
    puts Ray's printer back. (A private hook of Ray's driver: when it is not there, Ray prints as
    before.)
    """

    def __init__(self) -> None:
        import logging

        self.log = logging.getLogger("eyeblink.ray")
        self.nodes: set[str] = set()
        module: Any = sys.modules.get("ray._private.worker")
        self.module = module
        self.saved = getattr(module, "print_to_stdstream", None)
        if self.saved is not None:
            module.print_to_stdstream = self._print

    def _print(self, data: dict[str, Any], ignore_prefix: bool = False) -> None:
        if data.get("pid") != "raylet":  # a worker's own output (log_to_driver): Ray's printer
            assert self.saved is not None
            self.saved(data, ignore_prefix)
            return
        for text in data.get("lines") or []:
            self.log.info("ray: %s", text)
            line = self.line(str(text))
            if line:
                print(f"eyeblink: batch: {line}", file=sys.stderr, flush=True)

    def line(self, text: str) -> str | None:
        """The one line (or none) the user sees for Ray's message ``text``."""
        import re

        node = re.search(r"node[ _]id[:=]? ?([0-9a-f]{8})[0-9a-f]*", text, re.IGNORECASE)
        node_id = node.group(1) if node else None
        address = re.search(r"address:? ([0-9.]+)", text)
        if "Raylet is terminated" in text:
            return None  # the node's death follows, with its id (once per node, below)
        if "marked dead" in text:
            if node_id in self.nodes:
                return None
            self.nodes.add(node_id or "?")
            where = f" {address.group(1)}" if address else ""
            return (
                f"node{where} ({node_id or 'unknown id'}) lost; its tasks are retried on the "
                "other nodes "
                "(details in the --log-file)"
            )
        if "will be retried" in text:
            left = re.search(r"There (?:are|is) (\d+) retr", text)
            return f"a task was lost with its node ({node_id or 'unknown'}); retrying it" + (
                f" ({left.group(1)} retries left)" if left else ""
            )
        first = text.strip().splitlines()[0] if text.strip() else ""
        return first[:200] or None

    def close(self) -> None:
        module: Any = self.module
        if self.saved is not None and module is not None:
            module.print_to_stdstream = self.saved
            self.saved = None


def notices_silenced() -> RayLogLevel:
    """Keep Ray's notices (e.g. "Token authentication is enabled for this Ray cluster ...", logged
    at WARNING by ``ray.init`` on a new local cluster) off stderr below ``--log-level info``, as the
    TFLite runtime's INFO line is (``detect.litert.native_info_silenced``): a user error stays one
    line. Ray's own errors still show."""
    import logging

    if logging.getLogger("eyeblink").getEffectiveLevel() <= logging.INFO:
        return RayLogLevel(None)
    return RayLogLevel(logging.ERROR)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingExtraError(
            "eyeblink batch needs Ray, which is not installed; "
            "pip install 'eyeblink[ray]' (or pip install 'ray[default]')"
        ) from None
    return ray
