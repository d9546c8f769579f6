"""Sources: where frames come from. Each yields :class:`eyeblink.frames.Frame` (index, presentation
timestamp, image) and never decides anything about faces.

* :mod:`eyeblink.sources.files` — video files (PyAV) and image folders: ``FrameSource``,
  ``open_source``.
* :mod:`eyeblink.sources.live` — cameras, network streams and Basler/GenICam cameras:
  ``LiveSource``, ``open_live_source``, ``StreamOptions``.

Nothing is imported here: PyAV, OpenCV and pypylon load only when a source is opened.
"""
