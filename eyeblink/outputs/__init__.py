"""Outputs: everything written to disk after the frame core.

* :mod:`eyeblink.outputs.session` — the result types: ``RunResult``, ``SessionData``.
* :mod:`eyeblink.outputs.export` — the CSV writers of the output contract: ``ResultWriter``,
  ``FRAME_COLUMNS``, ``read_table``, ``clean_json``.
* :mod:`eyeblink.outputs.columns` — the ``frames.csv`` columns, declared once (``FRAME_TABLE``): the
  header, the docs, the sink's row, the workers' record fields, the live row, the LSL channels, the
  NWB series and the report's traces are derived from it.
* :mod:`eyeblink.outputs.analysis` — finalize a session (FEC calibrated, trials, plots, NWB):
  ``finalize``, ``AnalysisOptions``.
* :mod:`eyeblink.outputs.nwb` (pynwb, extra ``nwb``) and :mod:`eyeblink.outputs.plots` (matplotlib,
  extra ``plots``) — imported only when asked for.
"""
