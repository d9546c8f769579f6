"""Shared pytest fixtures: builders that write real test inputs (videos, image folders).

Builders write into ``tmp_path``, so tests never depend on files outside the repo. Third-party
data lives in ``EYEBLINK_DATA`` (default ``<repo>/../shared/data``) and is never copied here;
tests that need it use the ``data_dir`` fixture and skip when it is absent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- isolation: signals,
# environment


def default_signals() -> None:
    """``preexec_fn`` for a child a test stops with SIGINT or SIGTERM: both at their defaults and
    unblocked.

    A suite started in the background from a script (``pytest ... &``, ``nohup``) runs with SIGINT
    ignored, and an ignored signal stays ignored across exec: without this, ``eyeblink`` would keep
    it ignored (the Unix convention for background jobs, see docs/explanation/reliability.md) and a
    test's Ctrl-C would do nothing.
    """
    from eyeblink.stopping import default_child_signals

    default_child_signals()


#: ``subprocess.Popen(..., **CHILD_SIGNALS)``: the child starts with SIGINT and SIGTERM at their
#: defaults (POSIX; Windows runs nothing in a child before it starts, so ``subprocess`` refuses
#: ``preexec_fn`` there, and a console program does not inherit an ignored Ctrl-C that way)
CHILD_SIGNALS: dict[str, object] = {"preexec_fn": default_signals} if os.name == "posix" else {}


#: Windows' rules apply to this run: a Windows PC, or this host under
#: ``../shared/tools/windows-like``
WINDOWS_RULES = sys.platform == "win32" or "windows_like_site" in os.environ.get("PYTHONPATH", "")
#: a test of the fork start method (or a forked child): Windows has only spawn
needs_fork = pytest.mark.skipif(
    "fork" not in __import__("multiprocessing").get_all_start_methods(),
    reason="needs the fork start method (Windows has only spawn)",
)

#: a test that stops another process with a POSIX signal (SIGINT, SIGTERM) and checks what its
#: handler did: Windows delivers neither to a pid (``Popen.send_signal(SIGTERM)`` and ``os.kill``
#: end the process at once with TerminateProcess; Ctrl-C and Ctrl-Break reach the processes of a
#: console, not one pid)
posix_stop_signals = pytest.mark.skipif(
    os.name != "posix",
    reason="Windows sends no SIGINT or SIGTERM to another "
    "process (os.kill and Popen.send_signal end it with TerminateProcess)",
)


def kill_tree(proc: Any) -> None:
    """End a process (a ``Popen`` or a pid) and every process it started, at once and the platform's
    own way (``psutil``: SIGKILL on POSIX, TerminateProcess on Windows): no handler runs, nobody is
    left to clean up."""
    import psutil

    pid = proc if isinstance(proc, int) else proc.pid
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(procs, timeout=30)


@pytest.fixture(autouse=True)
def _isolated_process_state() -> Iterator[None]:
    """Each test leaves ``os.environ`` and the SIGINT/SIGTERM handlers as it found them (an
    in-process ``main``, ``ray.init``, a Keras backend choice must not reach later tests or their
    subprocesses)."""
    env = dict(os.environ)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)
    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


# --------------------------------------------------------------------------- the quick tier

#: tests that cost seconds each and whose module keeps quicker tests in the quick tier (``pytest -m
#: "not slow"``): marked ``slow`` here, in one place, with what each cost (all its parametrizations)
#: when the tier was measured with ``EYEBLINK_TEST_TIMES`` on a 2-core machine under heavy load
#: (load average ~20): every test of 3 s or more there. A name that no longer exists fails
#: ``tests/test_quick_tier.py``. The full run (README's second command, CI) runs them all.
SLOW_TESTS: dict[str, str] = {
    "test_accelerator.py::test_a_compile_past_its_bound_is_still_reported": "9 s",
    "test_accelerator.py::test_a_face_that_leaves_and_returns_gives_the_reference_rows": "5 s",
    "test_accelerator.py::test_a_real_xla_compile_longer_than_the_stall_timeout_is_no_stall": "49 "
    "s",
    "test_accelerator.py::test_a_stall_outside_a_compile_is_still_reported": "5 s",
    "test_accelerator.py::test_a_warm_up_longer_than_the_stall_timeout_is_no_stall": "12 s",
    "test_accelerator.py::test_accelerator_stage_failure_keeps_every_row_before_it": "4 s",
    "test_accelerator.py::test_accelerator_stage_on_keras_backends_matches_litert": "36 s",
    "test_accelerator.py::test_accelerator_stage_rows_equal_the_every_frame_reference": "7 s",
    "test_accelerator.py::test_live_accelerator_stage_flushes_partial_batches_after_the_deadline": "6 "
    "s",
    "test_accelerator.py::test_only_the_stage_process_starts_jax": "72 s",
    "test_accelerator.py::test_what_the_stage_cannot_run_is_one_line": "9 s",
    "test_adapt.py::test_an_overloaded_live_run_steps_down_and_says_so": "9 s",
    "test_adapt.py::test_no_adapt_keeps_the_settings": "7 s",
    "test_adapt.py::test_process_rows_do_not_depend_on_the_host_costs": "6 s",
    "test_agree.py::test_agree_on_the_demo_with_the_planted_blinks_as_corrections": "13 s",
    "test_api.py::test_a_wrong_setting_is_the_clis_one_line_message_as_a_value_error": "11 s",
    "test_api.py::test_api_and_cli_write_identical_files_and_tables": "9 s",
    "test_api.py::test_ctrl_c_inside_the_context_manager_stops_cleanly_and_keeps_every_row": "6 s",
    "test_api.py::test_example_process_and_plot": "6 s",
    "test_api.py::test_example_rig_gates_trials_on_a_real_ffmpeg_stream": "3 s",
    "test_api.py::test_live_api_on_a_loopback_stream_rows_blinks_states_and_the_gate_socket": "5 s",
    "test_api.py::test_load_refuses_a_damaged_session_naming_file_row_and_column": "3 s",
    "test_api.py::test_lsl_inlet_in_another_process_receives_every_sample_on_the_frames_clock": "7 "
    "s",
    "test_api.py::test_lsl_without_pylsl_is_one_line_naming_the_extra": "6 s",
    "test_backends.py::test_bench_detector_mesh_on_litert_tensorflow_and_jax": "67 s",
    "test_backends.py::test_ipu_backend_host_side_on_a_fake_sdk": "9 s",
    "test_backends.py::test_tensorflow_matches_litert": "35 s",
    "test_backends.py::test_tensorflow_rejects_bad_batches": "6 s",
    "test_backends.py::test_tensorflow_without_xla_streams_and_buckets": "4 s",
    "test_batch.py::test_batch_removes_a_stale_ring_and_leaves_none": "4 s",
    "test_batch.py::test_batch_retries_a_crashed_task": "8 s",
    "test_batch.py::test_batch_runs_archive_reports_corrupt_and_resumes": "61 s",
    "test_batch.py::test_batch_user_error_is_one_line_without_ray_notices": "17 s",
    "test_batch.py::test_chunked_real_recording_equals_process": "47 s",
    "test_batch.py::test_chunked_video_equals_unsplit_run": "158 s",
    "test_batch.py::test_cli_batch_exits_5_when_every_video_is_done_but_one_was_damaged": "12 s",
    "test_batch.py::test_short_videos_share_a_task_that_keeps_its_processes": "5 s",
    "test_batch.py::test_sigterm_stops_a_batch_like_ctrl_c": "11 s",
    "test_batch_cluster.py::test_batch_survives_a_lost_worker_node": "22 s",
    "test_bench_detectors.py::test_bench_detectors_through_the_cli_on_rendered_faces": "16 s",
    "test_blinks.py::test_same_blinks_at_30_and_500_fps": "8 s",
    "test_blinks.py::test_state_machine_invariants": "4 s",
    "test_cli.py::test_a_run_killed_outright_leaves_a_ring_the_next_run_removes": "17 s",
    "test_cli.py::test_a_run_killed_outright_leaves_a_summary_that_says_running": "23 s",
    "test_cli.py::test_damaged_bytes_in_the_middle_skip_packets_not_the_rest": "9 s",
    "test_cli.py::test_full_disk_is_one_line_whole_rows_and_the_other_inputs_run": "4 s",
    "test_cli.py::test_gpu_preset_without_a_gpu_says_so": "43 s",
    "test_cli.py::test_process_writes_the_output_contract": "6 s",
    "test_cli.py::test_several_inputs_and_an_image_folder": "4 s",
    "test_cli.py::test_summary_that_cannot_be_written_leaves_no_tmp_and_one_line": "13 s",
    "test_compare.py::test_the_same_run_on_two_workers_is_identical": "29 s",
    "test_detect.py::test_weighted_nms_invariants": "4 s",
    "test_docs.py::test_docs_build_strictly": "7 s",
    "test_docs.py::test_every_summary_field_is_described": "14 s",
    "test_docs.py::test_examples_run": "73 s",
    "test_docs.py::test_mkdocs_serve_works_offline": "5 s",
    "test_docs.py::test_site_loads_offline_in_chromium": "6 s",
    "test_docs_reader.py::test_the_example_command_writes_the_recording_the_docs_are_tested_on": "11 "
    "s",
    "test_evaluate.py::test_eval_on_zju_clips": "13 s",
    "test_examples.py::test_the_example_notebook_runs": "24 s",
    "test_keras_graph.py::test_jax_after_keras_on_tensorflow_is_one_line_naming_the_fix": "19 s",
    "test_keras_graph.py::test_jax_matches_litert_on_all_three_networks": "85 s",
    "test_keras_graph.py::test_tensorflow_matches_litert_on_all_three_networks": "39 s",
    "test_ladder.py::test_eval_ladder_runs_a_rendered_clip_through_the_pipeline": "60 s",
    "test_ladder.py::test_rungs_decimate_and_expose_real_frames_keeping_their_timestamps": "40 s",
    "test_ladder.py::test_the_rule_for_defaults_on_real_clips": "80 s",
    "test_lids.py::test_the_accelerator_stage_runs_the_lid_network_as_the_reference_does": "14 s",
    "test_lids.py::test_the_export_equals_the_keras_model_on_golden_inputs": "13 s",
    "test_lids.py::test_train_lids_through_the_cli_then_process_with_the_result": "15 s",
    "test_live.py::test_a_live_run_killed_outright_leaves_headers_and_a_running_summary": "6 s",
    "test_live.py::test_a_signal_while_waiting_for_the_sender_exits_0": "4 s",
    "test_live.py::test_basler_emulator": "12 s",
    "test_live.py::test_drop_policy_writes_gap_rows": "23 s",
    "test_live.py::test_live_session_is_finalised_like_process": "12 s",
    "test_live.py::test_real_ffmpeg_process_streams_a_recording_to_loopback": "28 s",
    "test_live.py::test_reconnect_retries_a_sender_that_sent_garbage_at_connect": "5 s",
    "test_live.py::test_sender_dies_mid_stream": "9 s",
    "test_live.py::test_sigterm_drains_and_exits_0": "12 s",
    "test_live.py::test_stream_end_to_end_with_metrics": "12 s",
    "test_live.py::test_stream_not_there_fails_in_one_line_after_loading": "12 s",
    "test_live.py::test_the_loopback_sender_writes_nut_without_syncpoints": "5 s",
    "test_live_config.py::test_a_live_auto_run_keeps_the_config_resolved_at_connection": "4 s",
    "test_live_config.py::test_a_presets_live_priority_is_what_the_live_run_asks_for": "4 s",
    "test_live_state.py::test_a_1000_fps_nut_stream_sizes_the_ring_from_its_rate_and_counts_every_drop": "5 "
    "s",
    "test_live_state.py::test_a_camera_frozen_with_its_connection_open_is_stale_and_never_open": "8 "
    "s",
    "test_live_state.py::test_a_real_recording_streamed_at_500_fps_gives_one_gate_line_and_one_marker_per_blink_of_blinks_csv": "21 "
    "s",
    "test_live_state.py::test_ctrl_c_any_number_of_times_inside_the_api_block_ends_the_session_cleanly": "3 "
    "s",
    "test_live_state.py::test_kill_9_of_live_ends_the_loader_and_the_workers_within_a_second": "3 "
    "s",
    "test_live_state.py::test_on_a_real_recording_the_gate_says_each_blink_of_blinks_csv_once_and_never_open_over_one": "6 "
    "s",
    "test_live_state.py::test_record_copies_a_compressed_stream_as_it_came": "6 s",
    "test_live_state.py::test_record_keeps_every_frame_received_and_process_reads_the_live_rows_back": "7 "
    "s",
    "test_live_state.py::test_the_gate_keeps_accepting_after_running_out_of_descriptors": "8 s",
    "test_live_state.py::test_under_overload_no_answer_is_older_than_the_latency_bound_and_every_drop_is_counted": "12 "
    "s",
    "test_loaders.py::test_three_loaders_write_the_rows_of_one": "111 s",
    "test_lock.py::test_two_api_runs_on_one_session_in_threads": "4 s",
    "test_lock.py::test_two_cli_runs_of_different_recordings_with_one_name_in_processes": "5 s",
    "test_long.py::test_a_closure_of_any_length_past_max_blink_ms_is_one_prolonged_closure": "3 s",
    "test_long.py::test_a_lasting_step_of_minus_10_percent_is_learnt": "5 s",
    "test_long.py::test_every_planted_blink_is_found_across_a_lasting_level_change": "20 s",
    "test_long.py::test_gaze_step_down_and_back": "4 s",
    "test_long.py::test_open_level_lowered_for_good_does_not_lock_up_the_detector": "4 s",
    "test_long.py::test_process_disturbance_at_30_fps": "9 s",
    "test_long.py::test_process_open_level_lowered_for_good_at_500_fps": "78 s",
    "test_memory.py::test_the_blink_detector_state_stays_bounded_over_20_minutes_at_500_fps": "122 "
    "s",
    "test_mesh.py::test_a_500_fps_recording_gives_the_same_blinks_with_the_mesh_reused": "49 s",
    "test_parallel.py::test_any_layout_gives_the_reference_frames": "33 s",
    "test_parallel.py::test_default_settings_give_the_reference_rows_byte_for_byte": "9 s",
    "test_platforms.py::test_process_with_spaces_and_accents_in_every_path_writes_lf_csvs_and_quoted_relative_links": "10 "
    "s",
    "test_points.py::test_batch_merges_the_chunks_points": "23 s",
    "test_points.py::test_live_writes_points": "4 s",
    "test_points.py::test_one_and_two_workers_write_the_same_points": "5 s",
    "test_points.py::test_points_lie_on_the_face_and_the_pose_follows_the_rendered_head": "6 s",
    "test_points.py::test_the_accelerator_stage_writes_the_fused_points": "3 s",
    "test_pool.py::test_a_long_input_is_handed_to_the_multiprocess_pipeline": "4 s",
    "test_pool.py::test_bench_short_mode_cuts_clips_and_reports_the_per_file_overhead": "9 s",
    "test_pool.py::test_short_inputs_run_whole_on_the_pool_with_the_reference_rows": "7 s",
    "test_reliability.py::test_a_log_file_that_is_an_input_is_refused": "8 s",
    "test_reliability.py::test_accelerator_summary_says_the_batches_it_ran": "5 s",
    "test_reliability.py::test_damaged_session_pages_draw_without_errors_in_chromium": "8 s",
    "test_reliability.py::test_json_output_checked_before_any_measurement": "15 s",
    "test_reliability.py::test_mesh_with_damaged_weights_is_a_model_error": "15 s",
    "test_reliability.py::test_option_errors_are_one_line": "6 s",
    "test_reliability.py::test_overlay_onto_the_recording_is_refused": "11 s",
    "test_reliability.py::test_process_refuses_an_output_that_is_the_recording": "4 s",
    "test_reliability.py::test_sigkill_never_leaves_a_blink_past_the_last_frame_row": "10 s",
    "test_report.py::test_overlay_video_decodes_with_every_frame_of_the_range": "10 s",
    "test_report.py::test_overlay_without_the_recording_names_the_fix": "17 s",
    "test_report.py::test_report_of_600k_frames_stays_small": "14 s",
    "test_report.py::test_report_of_a_processed_recording": "8 s",
    "test_report.py::test_report_renders_in_chromium": "6 s",
    "test_reproducible.py::test_zju_rows_do_not_depend_on_how_frames_are_dealt": "14 s",
    "test_review.py::test_keyboard_only_review_of_the_demo": "12 s",
    "test_review.py::test_keyboard_only_review_then_report_rereads_the_corrections": "5 s",
    "test_review.py::test_process_rerun_and_the_api_keep_the_decisions": "12 s",
    "test_review.py::test_reject_add_exclude_retime_and_a_trial_in_the_browser": "4 s",
    "test_review.py::test_saving_again_keeps_decisions_that_match_no_blink": "4 s",
    "test_roll.py::test_a_turned_camera_counts_the_blinks_of_the_upright_one": "9 s",
    "test_science.py::test_cli_conditioning_session": "7 s",
    "test_signals.py::test_a_stop_at_any_instant_of_start_up_is_never_lost": "54 s",
    "test_signals.py::test_the_summary_records_its_exit_status_and_every_file": "8 s",
    "test_sinks.py::test_a_new_output_is_one_method_and_close_and_sees_a_real_live_run": "8 s",
    "test_sources.py::test_zju_alignment": "5 s",
    "test_synth.py::test_recording_timestamps_match_truth": "30 s",
    "test_timeline.py::test_two_mpeg_ts_files_joined_with_cat": "8 s",
    "test_train_detector.py::test_export_keeps_the_stock_interface_and_outputs": "4 s",
    "test_train_detector.py::test_train_detector_end_to_end_on_rendered_frames": "32 s",
    "test_train_detector_ipu.py::test_cli_device_ipu_on_a_fake_sdk": "36 s",
    "test_train_detector_ipu.py::test_train_ipu_on_a_fake_sdk": "15 s",
    "test_view.py::test_a_browser_killed_mid_stream_leaves_the_rows_of_a_run_without_a_view": "26 "
    "s",
    "test_view.py::test_a_tab_that_stops_reading_is_let_go_and_the_rows_never_wait": "6 s",
    "test_view.py::test_process_view_shows_a_recording_as_it_is_processed": "36 s",
    "test_view.py::test_the_api_s_process_view_serves_the_page_while_a_recording_is_processed": "27 "
    "s",
    "test_view.py::test_the_api_s_view_url_serves_the_session": "15 s",
    "test_view.py::test_the_page_shows_the_trace_the_blinks_in_order_the_face_lost_banner_and_a_fresh_image": "23 "
    "s",
    "test_view.py::test_view_options_that_cannot_work_are_one_line": "5 s",
}


#: real-process tests that run again under Windows' rules (``-m "not slow or spawn_proof"`` under
#: windows-like, with the quick tier: tests/test_start_methods.py): every role of a run started the
#: portable way, as on Windows and macOS
SPAWN_PROOF = {
    "test_parallel.py::test_default_settings_give_the_reference_rows_byte_for_byte",
    "test_parallel.py::test_ctrl_c_keeps_the_rows",
    "test_parallel.py::test_a_failing_worker_stops_the_run_with_rows_on_disk",
    "test_pool.py::test_short_inputs_run_whole_on_the_pool_with_the_reference_rows",
    "test_pool.py::test_sigterm_ends_the_inputs_in_hand_with_their_rows",
    "test_live.py::test_stream_end_to_end_with_metrics",
    "test_live.py::test_real_ffmpeg_process_streams_a_recording_to_loopback",
    "test_live.py::test_sigterm_drains_and_exits_0",
    "test_live.py::test_a_signal_while_waiting_for_the_sender_exits_0",
    "test_live.py::test_live_session_is_finalised_like_process",
    "test_view.py::test_process_view_shows_a_recording_as_it_is_processed",
    "test_view.py::test_the_page_shows_the_trace_the_blinks_in_order_the_face_lost_banner_and_a_fresh_image",
    "test_api.py::test_live_api_on_a_loopback_stream_rows_blinks_states_and_the_gate_socket",
    "test_api.py::test_lsl_inlet_in_another_process_receives_every_sample_on_the_frames_clock",
    "test_sinks.py::test_a_new_output_is_one_method_and_close_and_sees_a_real_live_run",
    "test_accelerator.py::test_accelerator_stage_on_the_cpu_gives_the_default_rows",
    "test_live_state.py::test_record_keeps_every_frame_received_and_process_reads_the_live_rows_back",
    "test_live_state.py::test_a_real_recording_streamed_at_500_fps_gives_one_gate_line_and_one_marker_per_blink_of_blinks_csv",
    "test_api.py::test_example_process_and_plot",
    "test_api.py::test_example_rig_gates_trials_on_a_real_ffmpeg_stream",
    "test_start_methods.py::test_a_guarded_script_runs_under_spawn_and_an_unguarded_one_under_fork",
    "test_batch.py::test_short_videos_share_a_task_that_keeps_its_processes",
    "test_report.py::test_report_of_a_processed_recording",
    "test_review.py::test_keyboard_only_review_then_report_rereads_the_corrections",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SLOW_TESTS` ``slow`` (by name, every parametrization), and those of
    :data:`SPAWN_PROOF` ``spawn_proof``."""
    for item in items:
        name = f"{item.path.name}::{item.originalname}"
        if name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        if name in SPAWN_PROOF:
            item.add_marker(pytest.mark.spawn_proof)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``EYEBLINK_TEST_TIMES=FILE``, append each test's phase, outcome and seconds to FILE as
    it ends: how the quick tier (``-m "not slow"``) is kept within its minutes is measured this way,
    even on a run that is stopped part-way (``--durations`` prints only at the end)."""
    path = os.environ.get("EYEBLINK_TEST_TIMES")
    if path and (report.when == "call" or report.outcome != "passed" or report.duration > 0.5):
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{report.duration:.2f}\t{report.when}\t{report.outcome}\t{report.nodeid}\n")


# --------------------------------------------------------------------------- synthetic pixels


def synthetic_frames(
    n: int, width: int = 64, height: int = 48, *, color: bool = False
) -> list[np.ndarray]:
    """``n`` distinct uint8 frames: a moving bright bar on a level that changes per frame.

    Distinct, smooth content survives lossy codecs well enough to check ordering and values.
    """
    frames = []
    for i in range(n):
        img = np.full((height, width), (i * 37) % 200 + 20, dtype=np.uint8)
        img[:, (i * 3) % width] = 250
        if color:
            img = np.stack([img, np.roll(img, 5, axis=1), 255 - img], axis=-1)
        frames.append(img)
    return frames


@pytest.fixture
def make_frames() -> Callable[..., list[np.ndarray]]:
    """Builder: ``make_frames(n, width=64, height=48, *, color=False)`` ->
    :func:`synthetic_frames`."""
    return synthetic_frames


# --------------------------------------------------------------------------- video builder


def write_video(
    path: Path,
    frames: int | Sequence[np.ndarray],
    *,
    codec: str = "ffv1",
    pix_fmt: str = "gray",
    fps: int | Fraction = 500,
    pts: Sequence[int] | None = None,
    time_base: Fraction | None = None,
    fmt: str | None = None,
    width: int = 64,
    height: int = 48,
    options: dict[str, str] | None = None,
    gop: int | None = None,
) -> Path:
    """Write a real video with PyAV and return its path.

    ``frames`` is a count (synthetic frames of ``width`` x ``height``) or a list of uint8 gray
    ``(H, W)`` / RGB ``(H, W, 3)`` arrays. ``pts`` gives each frame's presentation timestamp in
    ``time_base`` units (default ``1/fps``), so gaps and repeats can be written on purpose.
    ``fmt`` forces the container format (e.g. ``"h264"`` for a raw elementary stream without
    timestamps); otherwise it follows the file suffix. ``options`` go to the encoder (e.g.
    ``{"g": "50"}``: a keyframe every 50 frames with libx264); ``gop`` sets the keyframe interval
    through the codec context (x264's scene-cut detection may add keyframes).
    """
    import av

    images = synthetic_frames(frames, width, height) if isinstance(frames, int) else list(frames)
    if pts is not None and len(pts) != len(images):
        raise ValueError(f"pts has {len(pts)} entries for {len(images)} frames")
    h, w = images[0].shape[:2] if images else (height, width)
    container = av.open(str(path), mode="w", format=fmt)
    stream = container.add_stream(codec, rate=fps, options=options or {})
    stream.width, stream.height, stream.pix_fmt = w, h, pix_fmt
    if gop is not None:
        stream.codec_context.gop_size = gop
    tb = time_base or (Fraction(1, fps) if isinstance(fps, int) else 1 / fps)
    if pts is not None:
        stream.time_base = tb
        stream.codec_context.time_base = tb
    if not images:
        container.start_encoding()  # header only: a video stream with zero frames
    for i, img in enumerate(images):
        src = av.VideoFrame.from_ndarray(img, format="gray" if img.ndim == 2 else "rgb24")
        frame = src.reformat(format=pix_fmt)
        if pts is not None:
            frame.pts = pts[i]
            frame.time_base = tb
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    return path


MakeVideo = Callable[..., Path]


@pytest.fixture
def make_video(tmp_path: Path) -> MakeVideo:
    """Builder: ``make_video(frames, *, codec, container, pts=None, fps, pix_fmt, ...) -> Path``.

    ``container`` is the file suffix (``"avi"``, ``"mkv"``, ``"mp4"``, ``"h264"``); every other
    keyword goes to :func:`write_video`. Each call writes a new file under ``tmp_path``.
    """
    counter = iter(range(1_000_000))

    def build(
        frames: int | Sequence[np.ndarray], *, container: str = "mkv", **kwargs: object
    ) -> Path:
        path = tmp_path / f"video{next(counter)}.{container}"
        return write_video(path, frames, **kwargs)  # type: ignore[arg-type]

    return build


# --------------------------------------------------------------------------- image-folder builder

MakeImageFolder = Callable[..., Path]


@pytest.fixture
def make_image_folder(tmp_path: Path) -> MakeImageFolder:
    """Builder: ``make_image_folder({"frame1.png": array_or_None, ...}, name="imgs") -> Path``.

    An array is saved with PIL in the format its suffix implies; ``None`` writes a text file
    (for "non-image files are ignored" cases). Returns the folder.
    """
    from PIL import Image

    def build(files: dict[str, np.ndarray | None], *, name: str = "imgs") -> Path:
        folder = tmp_path / name
        folder.mkdir()
        for filename, img in files.items():
            if img is None:
                (folder / filename).write_text("not an image\n")
            else:
                Image.fromarray(img).save(folder / filename)
        return folder

    return build


# --------------------------------------------------------------------------- third-party data


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The research-only test data folder (``EYEBLINK_DATA`` or ``<repo>/../shared/data``)."""
    path = Path(os.environ.get("EYEBLINK_DATA", REPO_ROOT.parent / "shared" / "data"))
    if not path.is_dir():
        pytest.skip(f"test data not found at {path} (set EYEBLINK_DATA)")
    return path


# --------------------------------------------------------------------------- recordings with a face


@pytest.fixture(scope="session")
def face_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A real 640x480 gray 500 FPS MJPG recording of a face with one full blink (1.6 s, 800 frames).

    Rendered once per session by :mod:`eyeblink.lab.synth`; returns ``(path, SyntheticTruth)``.
    """
    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording

    path = tmp_path_factory.mktemp("recordings") / "subject.avi"
    cfg = SynthConfig(
        duration_s=1.6,
        blinks=(BlinkSpec(onset_s=0.8, closing_ms=70, closed_ms=30, opening_ms=140),),
        mjpeg_qscale=4,
        seed=1,
    )
    return path, write_recording(path, cfg)


@pytest.fixture(scope="session")
def face_frames(face_recording: tuple[Path, object]) -> list[np.ndarray]:
    """The decoded gray frames of :func:`face_recording`."""
    from eyeblink.sources.files import open_source

    with open_source(face_recording[0]) as src:
        return [f.image for f in src]


#: the headless browser the report and docs tests open pages in (Debian package ``chromium``)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium not installed (Debian: apt-get "
    "install chromium); the page is not opened in a browser",
)


def run_cli(
    *args: str | Path, cwd: Path | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """``python -m eyeblink ARGS`` as a user runs it (no stdin), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "eyeblink", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


def stop_when(
    proc: subprocess.Popen[str],
    ready: Callable[[], bool],
    sig: int,
    *,
    if_ended: Callable[[], object] | None = None,
    wait_s: float = 300.0,
) -> str:
    """Send ``sig`` to ``proc`` once ``ready()`` (polled), then its stderr when it has exited. A run
    that ended first calls ``if_ended`` (default: the test fails); the process is killed if anything
    goes wrong."""
    import time

    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and proc.poll() is None:
            if ready():
                break
            time.sleep(0.02)
        if proc.poll() is not None or time.monotonic() >= deadline:
            if if_ended is None:
                pytest.fail(f"the run was not ready for the stop (exit status {proc.poll()})")
            if_ended()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return stderr


def assert_damaged_model_is_refused(
    model: str, damaged: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the shipped mesh and iris files copied to ``tmp_path`` as the weights folder and
    ``damaged`` there cut short, ``create_eye_model(model)`` fails its sha256 check naming
    ``damaged``."""
    from eyeblink import weights
    from eyeblink.errors import ModelFileError
    from eyeblink.landmarks import create_eye_model

    for name in (weights.FACE_MESH_FILENAME, weights.IRIS_FILENAME):
        (tmp_path / name).write_bytes((weights.WEIGHTS_DIR / name).read_bytes())
    (tmp_path / damaged).write_bytes((weights.WEIGHTS_DIR / damaged).read_bytes()[:-8])
    monkeypatch.setattr(weights, "WEIGHTS_DIR", tmp_path)
    with pytest.raises(ModelFileError, match=f"{damaged} fails its sha256 check"):
        create_eye_model(model)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for a loopback sender, a gate or a metrics server)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_sender(port: int, *args: str, distinct: int = 50) -> subprocess.Popen[str]:
    """The project's loopback sender (NUT, rawvideo; ``distinct`` rendered frames looped, one 150 ms
    blink a second) on ``port``; returns once it listens."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink.lab.loopback",
            "--port",
            str(port),
            "--distinct",
            str(distinct),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "listening", proc.stderr.read() if proc.stderr else ""
    return proc


def run_with_sender(
    script: str, out: Path, *sender_args: str, distinct: int = 50, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``python -c script URL OUT`` while the loopback sender (:func:`start_sender` with
    ``sender_args`` and ``distinct``) streams on URL; the sender is killed afterwards, whatever
    happened."""
    port = free_port()
    sender = start_sender(port, *sender_args, distinct=distinct)
    try:
        return subprocess.run(
            [sys.executable, "-c", script, f"tcp://127.0.0.1:{port}", str(out)],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            timeout=timeout,
            **CHILD_SIGNALS,
        )  # scripts that press Ctrl-C on themselves
    finally:
        sender.kill()


def live_to_end(live: subprocess.Popen[str], sender: subprocess.Popen[str], timeout: float) -> str:
    """Wait up to ``timeout`` s for the ``eyeblink live`` run ``live`` to end (the sender's stream
    ended); both processes are gone afterwards, whatever happened. Asserts exit status 0; the run's
    stderr."""
    try:
        _, err = live.communicate(timeout=timeout)
    finally:
        live.kill()
        sender.kill()
    assert live.returncode == 0, err
    return err


class GateClient:
    """A TCP client of a live session's gate, reading in a thread: every JSON line with its receive
    time (``perf_counter``)."""

    def __init__(self, port: int) -> None:
        import socket
        import threading

        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.lines: list[tuple[float, dict]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        import json
        import time

        buf = b""
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.lines.append((time.perf_counter(), json.loads(line)))

    def wait_for(self, event: str, timeout_s: float = 10.0) -> tuple[float, dict]:
        """The first line of ``event`` (its receive time and message), waiting up to
        ``timeout_s``."""
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for got in list(self.lines):
                if got[1]["event"] == event:
                    return got
            time.sleep(0.002)
        raise AssertionError(
            f"no {event!r} line within {timeout_s} s: {[m['event'] for _, m in self.lines]}"
        )

    def join(self) -> list[dict]:
        """Wait for the gate to close the connection; every message received."""
        self.thread.join(timeout=30)
        self.sock.close()
        return [m for _, m in self.lines]


class LslPuller:
    """Reads a live session's LSL sample stream ``name`` (and, with ``markers``, ``name-markers``)
    in a thread, as a lab's recorder would, until :meth:`stop`: ``samples`` (one list per sample)
    and ``markers`` (strings). The session waits for the sample inlet before it connects its source
    (``lsl_wait_s``)."""

    def __init__(self, name: str, *, markers: bool = False) -> None:
        import threading

        self.pylsl = pytest.importorskip("pylsl")
        self.samples: list[list[float]] = []
        self.markers: list[str] = []
        self._ended = threading.Event()
        self.thread = threading.Thread(target=self._pull, args=(name, markers), daemon=True)
        self.thread.start()

    def _pull(self, name: str, markers: bool) -> None:
        pylsl = self.pylsl
        marks = None
        if markers:
            (minfo,) = pylsl.resolve_byprop("name", f"{name}-markers", 1, 60)
            marks = pylsl.StreamInlet(minfo, 360)
            marks.open_stream(30)
        (info,) = pylsl.resolve_byprop("name", name, 1, 60)
        inlet = pylsl.StreamInlet(info, 360)
        inlet.open_stream(30)
        while True:
            chunk, _ = inlet.pull_chunk(timeout=0.0 if marks is not None else 0.2)
            self.samples.extend(chunk)
            if marks is not None:
                chunk, _ = marks.pull_chunk(timeout=0.2)
                self.markers.extend(m[0] for m in chunk)
            if self._ended.is_set() and not chunk:
                return

    def stop(self, timeout: float = 30.0) -> None:
        """Read what is still queued, then end the thread."""
        self._ended.set()
        self.thread.join(timeout)


def zju_subset(data_dir: Path, tmp_path: Path, clips: Sequence[str]) -> Path:
    """A dataset folder of the zju-dev ``clips`` (video and ``.tag``, symlinked: research data is
    never copied); skips the test when any is missing."""
    src = data_dir / "zju-dev"
    if not all((src / f"{c}.avi").is_file() for c in clips):
        pytest.skip(f"zju-dev clips {tuple(clips)} not found under {src}")
    ds = tmp_path / "zju"
    ds.mkdir()
    for c in clips:
        for ext in (".avi", ".tag"):
            (ds / f"{c}{ext}").symlink_to(src / f"{c}{ext}")
    return ds
