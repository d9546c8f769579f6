"""The Lab Streaming Layer outlets of a live session (``--lsl``, extra ``lsl``).

One per-frame sample stream and one marker stream, described as the XDF conventions ask (channel
labels, units, types, the source, eyeblink's version), so LabRecorder records them as they are. Each
sample and marker carries its frame's capture time on LSL's clock (the tap's mapping,
:meth:`eyeblink.runtime.live.publish.LiveTap.lsl_time`).
"""

from __future__ import annotations

import contextlib
import operator
import sys
import time
from collections.abc import Callable
from typing import Any

from eyeblink.errors import MissingExtraError, warn
from eyeblink.outputs import columns as _columns
from eyeblink.runtime.live.sinks.base import (
    Blink,
    Connected,
    GateLine,
    Item,
    Opened,
    Ready,
    Row,
    Sink,
)
from eyeblink.runtime.live.sinks.gate import GATE_EVENTS
from eyeblink.version import __version__

__all__ = ["LSL_CHANNELS", "LslOutlets", "LslSink", "check_pylsl"]

#: The per-frame LSL sample: (label, unit, type) per channel, in order: openness_left,
#: openness_right (frames.csv ear_left, ear_right), closure (online FEC), face, frame, then age (ms
#: since the frame was received). Declared with the frames.csv columns
#: (:attr:`eyeblink.outputs.columns.FrameColumn.lsl`, and the live-only
#: :data:`~eyeblink.outputs.columns.LSL_LIVE_CHANNELS`): a channel is added there, not here.
LSL_CHANNELS: tuple[tuple[str, str, str], ...] = _columns.FRAME_TABLE.lsl_channels
#: the message when pylsl is not installed
NO_PYLSL = (
    "--lsl needs pylsl, which is not installed; pip install 'eyeblink[lsl]' (or pip install pylsl)"
)


#: liblsl's own log (its INFO lines on stderr: "Loaded default config", its git build, ...) kept to
#: errors: the session's outlets are announced by eyeblink in one line. A user's own ``LSLAPICFG``
#: is left alone.
_LSL_QUIET_CFG = "[log]\nlevel = -2\n"


def _quiet_liblsl() -> None:
    """Point liblsl at a configuration that logs errors only, before pylsl loads it (once per
    process)."""
    import os
    import tempfile

    if "LSLAPICFG" in os.environ or "pylsl" in sys.modules:
        return
    fd, path = tempfile.mkstemp(prefix="eyeblink-lsl-", suffix=".cfg")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(_LSL_QUIET_CFG)
    os.environ["LSLAPICFG"] = path


def _same_name_streams(pylsl: Any, name: str) -> list[Any]:
    """LSL streams named ``name`` already on this network (0.2 s to ask): a second session by one
    name makes an inlet that resolves by name pick either."""
    try:
        return list(pylsl.resolve_byprop("name", name, minimum=1, timeout=0.2))
    # resolving is an aid to the warning: a network that does not answer is no error here
    except Exception:
        return []


class LslOutlets:
    """The two LSL outlets of a live session: ``<name>`` (per-frame samples) and
    ``<name>-markers``."""

    def __init__(
        self,
        name: str,
        *,
        source: str,
        stem: str,
        nominal_fps: float | None,
        eye_model: str,
        timestamps: str | None = None,
    ) -> None:
        _quiet_liblsl()
        try:
            import pylsl
        except ImportError:
            raise MissingExtraError(NO_PYLSL) from None
        except (OSError, RuntimeError) as exc:  # pylsl installed but liblsl missing
            raise MissingExtraError(
                f"--lsl: pylsl cannot load liblsl ({exc}); pip install 'eyeblink[lsl]'"
            ) from None
        self._pylsl = pylsl
        rate = float(nominal_fps) if nominal_fps and nominal_fps > 0 else pylsl.IRREGULAR_RATE
        self.nominal_fps = rate
        source_id = f"eyeblink:{source}:{stem}"
        # the run's table (its channels, and the live row's fields they send)
        table = _columns.FRAME_TABLE
        self.channels = table.lsl_channels
        self._sample = operator.attrgetter(*table.lsl_fields)
        info = pylsl.StreamInfo(
            name, "Eyeblink", len(self.channels), rate, pylsl.cf_double64, source_id
        )
        self._describe(
            info,
            source=source,
            stem=stem,
            eye_model=eye_model,
            timestamps=timestamps,
            channels=self.channels,
        )
        minfo = pylsl.StreamInfo(
            f"{name}-markers",
            "Markers",
            1,
            pylsl.IRREGULAR_RATE,
            pylsl.cf_string,
            f"{source_id}:markers",
        )
        self._describe(
            minfo,
            source=source,
            stem=stem,
            eye_model=eye_model,
            timestamps=timestamps,
            channels=None,
        )
        self.local_clock: Callable[[], float] = pylsl.local_clock
        others = _same_name_streams(pylsl, name)
        self.name_taken_by = [o.source_id() for o in others]
        if others:
            warn(
                f"--lsl: another LSL stream named {name!r} is already published on this network "
                "(source "
                f"{others[0].source_id()!r} on {others[0].hostname()!r}); an inlet that resolves "
                "by name may get "
                f"either: give this session its own name with --lsl-name"
            )
        self.samples = pylsl.StreamOutlet(info, 1, 360)  # chunk of 1 sample: sent at once
        self.markers = pylsl.StreamOutlet(minfo, 1, 360)
        self.name = name

    @staticmethod
    def _describe(
        info: Any,
        *,
        source: str,
        stem: str,
        eye_model: str,
        timestamps: str | None,
        channels: tuple[tuple[str, str, str], ...] | None,
    ) -> None:
        desc = info.desc()
        if channels is not None:
            chans = desc.append_child("channels")
            for label, unit, kind in channels:
                ch = chans.append_child("channel")
                ch.append_child_value("label", label)
                ch.append_child_value("unit", unit)
                ch.append_child_value("type", kind)
        else:
            ch = desc.append_child("channels").append_child("channel")
            ch.append_child_value("label", "event")
            ch.append_child_value("type", "Marker")
            desc.append_child_value(
                "events",
                ", ".join(GATE_EVENTS) + " (state:<state>; blink:<kind> for a "
                "settled event that is not a blink)",
            )
        acq = desc.append_child("acquisition")
        acq.append_child_value("manufacturer", "eyeblink")
        acq.append_child_value("model", f"eyeblink {eye_model}")
        acq.append_child_value("software_version", __version__)
        eb = desc.append_child("eyeblink")
        eb.append_child_value("version", __version__)
        eb.append_child_value("source", source)
        eb.append_child_value("stem", stem)
        eb.append_child_value("eye_model", eye_model)
        eb.append_child_value(
            "timestamps",
            "frame capture time (the source's clock) mapped onto local_clock at "
            f"the first frame ({timestamps or 'source clock'})",
        )

    def have_consumers(self) -> bool:
        return bool(self.samples.have_consumers())

    def wait_for_consumers(
        self, timeout_s: float, cancelled: Callable[[], bool] | None = None
    ) -> bool:
        """Wait up to ``timeout_s`` for an inlet on the sample stream (a recorder that should get
        every sample)."""
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if self.samples.have_consumers():
                return True
            if cancelled is not None and cancelled():
                return False
            time.sleep(0.01)
        return bool(self.samples.have_consumers())

    def push(self, row: Any, lsl_time: float) -> None:
        self.samples.push_sample([float(v) for v in self._sample(row)], lsl_time)

    def marker(self, text: str, lsl_time: float) -> None:
        self.markers.push_sample([text], lsl_time)

    def close(self) -> None:
        for name in ("samples", "markers"):
            outlet = getattr(self, name, None)
            if outlet is not None:
                with contextlib.suppress(Exception):
                    del outlet
                setattr(self, name, None)


class LslSink(Sink):
    """The two outlets as an output of the run: made as soon as their rate is known (``--fps`` or a
    camera's at :class:`Opened`, a network stream's at :class:`Connected`), or at :class:`Opened`
    when an inlet is to be waited for (``--lsl-wait``, at :class:`Ready`). Made only where pylsl is
    installed (the error, before any model loads, names the extra)."""

    order = 20
    summary_key = "lsl"
    takes = (Opened, Ready, Connected, Row, GateLine, Blink)

    def __init__(self, name: str = "eyeblink", wait_s: float = 0.0) -> None:
        check_pylsl()
        self.name = name
        self.wait_s = wait_s
        self.outlets: LslOutlets | None = None
        self.tap: Any = None
        self.session: Opened | None = None
        self.nominal_fps: float | None = None
        self.eye_model = ""

    @classmethod
    def from_config(
        cls, live: Any, *, announce: Callable[[str], None] | None = None
    ) -> LslSink | None:
        return cls(live.lsl_name, live.lsl_wait_s) if live.lsl else None

    def put(self, item: Item) -> None:
        match item:
            case Row(row=r, published=published):
                if published and self.outlets is not None:
                    self.outlets.push(r, self.tap.lsl_time(r.timestamp_s))
            case GateLine(event=ev):
                if self.outlets is not None:
                    self.outlets.marker(ev.marker, self.tap.lsl_time(ev.timestamp_s))
            case Blink(event=ev):
                if self.outlets is not None:
                    kind = getattr(ev, "kind", "blink")
                    self.outlets.marker(
                        "blink" if kind == "blink" else f"blink:{kind}",
                        self.tap.lsl_time(ev.start_s),
                    )
            case Opened():
                self.session, self.tap = item, item.tap
                self.nominal_fps, self.eye_model = item.nominal_fps, item.eye_model
                if item.nominal_fps or self.wait_s > 0:
                    self._open()
            case Ready(cancelled=cancelled):
                if self.outlets is not None and self.wait_s > 0:
                    ok = self.outlets.wait_for_consumers(self.wait_s, cancelled)
                    self.tap.say(
                        "lsl: an inlet is connected"
                        if ok
                        else f"lsl: no inlet after {self.wait_s:g} s; starting anyway"
                    )
            case Connected():
                self.nominal_fps, self.eye_model = item.nominal_fps, item.eye_model
                self._open()

    def _open(self) -> None:
        if self.outlets is not None or self.session is None:
            return
        tap, s = self.tap, self.session
        self.outlets = lsl = LslOutlets(
            self.name,
            source=s.source,
            stem=s.stem,
            nominal_fps=self.nominal_fps,
            eye_model=self.eye_model,
            timestamps=s.timestamps,
        )
        # perf_counter -> LSL's clock (the same clock on Linux; not everywhere)
        clock = lsl.local_clock
        tap.set_clock(min((clock() - time.perf_counter() for _ in range(5)), key=abs))
        rate = (
            "irregular rate (declare --fps)" if not lsl.nominal_fps else f"{lsl.nominal_fps:g} Hz"
        )
        tap.say(f"lsl: streams {self.name!r} (samples, {rate}) and {self.name + '-markers'!r}")

    def close(self, reason: str | None = None) -> None:
        if self.outlets is not None:
            self.outlets.close()
            self.outlets = None

    def summary(self) -> dict[str, str]:
        return {"samples": self.name, "markers": f"{self.name}-markers"}


def check_pylsl() -> None:
    """pylsl is installed (not loaded: liblsl loads with the outlets); else one line naming the
    extra."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("pylsl")
    except (ImportError, ValueError):  # a broken install, or blocked in sys.modules
        spec = None
    if spec is None:
        raise MissingExtraError(NO_PYLSL)
