"""Per-trial metrics against closed-form answers of synthetic trials."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.metrics import METRIC_NAMES, REACH_METRICS, trial_metrics
from analysis.trial import read_trial
from capture_trainer import trial_log
from capture_trainer.errors import AnalysisError


def test_constant_velocity_approach_gives_exact_reach_time_distance_and_impact(factory, synth):
    closing, gap, target_speed = 0.15, 0.28, 0.1
    path = factory.write("approach", synth.approach(closing, gap, target_speed))
    metrics = trial_metrics(path)
    reach_s = (gap - synth.RADIUS_M) / closing  # 1.83733... s, between two samples
    assert metrics.reached
    assert metrics.time_to_reach_s == pytest.approx(reach_s, abs=1e-12)
    # the end effector moves at |c - v_target| = 0.05 m/s
    assert metrics.distance_travelled_m == pytest.approx((closing - target_speed) * reach_s, abs=1e-12)
    assert metrics.impact_velocity_m_s == pytest.approx(closing, abs=1e-12)
    assert (metrics.impact_velocity_x_m_s, metrics.impact_velocity_y_m_s, metrics.impact_velocity_z_m_s) == (
        pytest.approx(closing),
        0.0,
        0.0,
    )
    assert metrics.impact_normal_velocity_m_s == pytest.approx(closing, abs=1e-12)
    # the relative velocity is constant: its mean square over the window is c^2
    assert metrics.mse_velocity_m2_s2 == pytest.approx(closing**2, rel=1e-12)
    assert metrics.post_capture_observed_s == pytest.approx(1.0, abs=1e-12)


def test_sinusoidal_post_capture_error_gives_analytic_mse(factory, synth):
    amplitude, frequency = 0.003, 5.0  # five whole periods in the 1 s window
    columns, reach_s = synth.capture_oscillation(amplitude, frequency)
    metrics = trial_metrics(factory.write("oscillation", columns))
    omega = 2.0 * math.pi * frequency
    h = synth.DT_S
    # Trapezoid on the samples: the error of a mean over the window W = 1 s is at most
    # h^2/12 max|f''|; the two partial intervals at the window's ends (signals interpolated
    # linearly) add O(h^3) each, bounded generously by 2 h^3 max|f''|.
    def bound(max_f2: float) -> float:
        return (h**2 / 12 + 2 * h**3) * max_f2

    r = synth.RADIUS_M
    velocity_bound = bound(2 * (amplitude * omega) ** 2 * omega**2)  # f = (A w)^2 cos^2
    gap_bound = bound(2 * amplitude**2 * omega**2)  # f = A^2 sin^2 where positive
    centre_bound = bound(2 * amplitude**2 * omega**2 + 2 * (r + amplitude) * amplitude * omega**2)
    assert metrics.time_to_reach_s == pytest.approx(reach_s, abs=h * (omega * h) ** 2)
    # v is interpolated between c and c cos(w tau), tau < h: relative error < (w h)^2 / 2
    assert metrics.impact_velocity_m_s == pytest.approx(amplitude * omega, rel=(omega * h) ** 2 / 2)
    assert metrics.mse_velocity_m2_s2 == pytest.approx((amplitude * omega) ** 2 / 2, abs=velocity_bound)
    # max(d, 0)^2 with d = -A sin: half the time A^2 sin^2, half the time 0
    assert metrics.mse_position_m2 == pytest.approx(amplitude**2 / 4, abs=gap_bound)
    assert metrics.mse_centre_position_m2 == pytest.approx(r**2 + amplitude**2 / 2, abs=centre_bound)
    # the bounds are tight enough to catch a wrong window (e.g. 0.9 s or 1.1 s)
    assert velocity_bound < 1e-3 * (amplitude * omega) ** 2 / 2


def test_contact_that_leaves_the_tolerance_is_not_a_capture(factory, synth):
    # the gap reaches A = 3 mm each period; tolerance 2 mm: every contact breaks
    columns, _ = synth.capture_oscillation(0.003, 5.0, after_reach_s=1.43)
    metrics = trial_metrics(factory.write("bouncing", columns, capture_tolerance_m=0.002))
    assert not metrics.captured
    assert math.isnan(metrics.capture_time_s)
    # contacts start at tau = 0, 0.2, ..., 1.4 s: eight of them
    assert metrics.n_contacts == 8


def test_contact_within_tolerance_for_the_window_is_a_capture_at_its_end(factory, synth):
    columns, reach_s = synth.capture_oscillation(0.003, 5.0)
    metrics = trial_metrics(factory.write("held", columns, capture_tolerance_m=0.0035))
    assert metrics.captured
    assert metrics.n_contacts == 1
    assert metrics.capture_time_s == pytest.approx(reach_s + 1.0, abs=1e-6)


def test_trial_that_never_reaches_is_reported_with_nan_reach_metrics(factory, synth):
    time_s = np.arange(0.0, 2.0, synth.DT_S)
    n = time_s.size
    ee = np.tile([0.0, 0.0, 0.0], (n, 1))
    target = np.tile([0.3, 0.4, 0.0], (n, 1))  # 0.5 m away, never moves
    columns = synth.trial_columns(time_s, ee, target, np.zeros((n, 3)), np.zeros((n, 3)))
    metrics = trial_metrics(factory.write("miss", columns))
    assert metrics.reached is False
    for name in REACH_METRICS:
        assert math.isnan(getattr(metrics, name)), name
    assert not metrics.captured and metrics.n_contacts == 0
    assert metrics.min_surface_distance_m == pytest.approx(0.5 - synth.RADIUS_M)
    assert metrics.duration_s == pytest.approx(time_s[-1])


def test_trial_that_reaches_at_the_first_sample(factory, synth):
    time_s = np.arange(0.0, 1.5, synth.DT_S)
    n = time_s.size
    ee_v = np.tile([0.02, -0.01, 0.005], (n, 1))
    target = np.tile([0.3, 0.1, 0.0], (n, 1))
    ee = target + np.array([0.001, 0.0, 0.0]) + time_s[:, None] * ee_v[0]  # inside, drifting slowly
    columns = synth.trial_columns(time_s, ee, target, ee_v, np.zeros((n, 3)))
    metrics = trial_metrics(factory.write("inside", columns))
    assert metrics.reached
    assert metrics.time_to_reach_s == 0.0
    assert metrics.distance_travelled_m == 0.0
    assert metrics.impact_velocity_m_s == pytest.approx(math.sqrt(0.02**2 + 0.01**2 + 0.005**2))
    assert metrics.impact_velocity_y_m_s == pytest.approx(-0.01)
    assert metrics.post_capture_observed_s == pytest.approx(1.0)


def test_incomplete_trial_is_analysed_as_far_as_it_goes(factory, synth):
    columns, reach_s = synth.capture_oscillation(0.003, 5.0)
    cut = int((reach_s + 0.4) / synth.DT_S)  # crashed 0.4 s into the window
    truncated = {name: values[:cut] for name, values in columns.items()}
    path = factory.write("crashed", truncated, complete=False, end_reason="fault")
    metrics = trial_metrics(path)
    assert metrics.complete is False
    assert metrics.reached
    assert metrics.time_to_reach_s == pytest.approx(reach_s, abs=1e-6)
    observed = truncated[trial_log.TIME][-1] - reach_s
    assert metrics.post_capture_observed_s == pytest.approx(observed, abs=1e-6)
    assert not metrics.captured  # the window was never completed


def test_empty_log_of_a_trial_that_crashed_at_once(factory, synth):
    columns = synth.trial_columns(np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3)))
    metrics = trial_metrics(factory.write("empty", columns, complete=False))
    assert not metrics.reached and metrics.n_ticks == 0 and not metrics.complete


def test_base_torque_attitude_force_and_flag_metrics(factory, synth):
    time_s = np.arange(0.0, 2.0 + synth.DT_S / 2, synth.DT_S)  # 2001 ticks
    n = time_s.size
    torque_amplitude = 0.2
    replan = np.zeros(n, dtype=bool)
    replan[[0, 1, 500, 501, 502, 1500]] = True  # three rising edges (first tick counts)
    saturated = np.zeros(n, dtype=bool)
    saturated[:500] = True
    fault = np.zeros(n, dtype=bool)
    fault[-7:] = True
    extra = {
        "base_torque_z_n_m": torque_amplitude * np.sin(2 * np.pi * 2.0 * time_s),  # 4 periods
        "base_att_x_rad": 0.01 * time_s,
        "base_att_y_rad": -0.02 * time_s,
        "dev_force_calc_x_n": np.full(n, 6.0),
        "dev_force_calc_y_n": np.full(n, -8.0),
        "dev_force_act_x_n": np.full(n, 3.0),
        "dev_force_act_y_n": np.full(n, -3.0),
        "replan": replan,
        "saturated": saturated,
        "fault": fault,
        "sigma_ratio": np.linspace(0.9, 0.3, n),
    }
    static = np.tile([0.0, 0.0, 0.0], (n, 1))
    target = np.tile([1.0, 0.0, 0.0], (n, 1))
    columns = synth.trial_columns(time_s, static, target, np.zeros((n, 3)), np.zeros((n, 3)), **extra)
    metrics = trial_metrics(factory.write("signals", columns))
    assert metrics.peak_base_torque_n_m == pytest.approx(torque_amplitude, rel=1e-5)
    assert metrics.rms_base_torque_n_m == pytest.approx(torque_amplitude / math.sqrt(2), rel=1e-5)
    assert metrics.final_base_attitude_rad == pytest.approx(math.hypot(0.02, 0.04))
    assert metrics.peak_base_attitude_rad == pytest.approx(math.hypot(0.02, 0.04))
    assert metrics.peak_force_calculated_n == pytest.approx(10.0)
    assert metrics.peak_force_actuated_n == pytest.approx(math.hypot(3.0, 3.0))
    assert metrics.saturated_fraction == pytest.approx(500 / n)
    assert metrics.n_replans == 3
    assert metrics.n_fault_ticks == 7
    assert metrics.n_watchdog_ticks == 0
    assert metrics.min_sigma_ratio == pytest.approx(0.3)


@settings(max_examples=40, deadline=None)
@given(
    start=st.tuples(*(st.floats(-0.3, 0.3) for _ in range(3))).filter(lambda p: math.dist(p, (0, 0, 0)) > 0.05),
    speed=st.floats(0.02, 0.5),
    miss=st.floats(0.0, 0.9),
    radius=st.floats(0.001, 0.02),
    dt=st.sampled_from([0.001, 0.002, 0.004]),
)
def test_oblique_constant_velocity_reach_time_is_exact(synth, start, speed, miss, radius, dt):
    """p(t) = p0 + w t with w aimed past the centre: t_r solves |p0 + w t| = r (closed form)."""
    p0 = np.array(start)
    direction = -p0 / np.linalg.norm(p0)
    side = np.cross(direction, [0.0, 0.0, 1.0] if abs(direction[2]) < 0.9 else [1.0, 0.0, 0.0])
    side /= np.linalg.norm(side)
    impact_parameter = miss * radius  # closest approach of the line to the centre
    aim = p0 + direction * np.linalg.norm(p0) + side * impact_parameter
    w = speed * (aim - p0) / np.linalg.norm(aim - p0)
    a, b, c = w @ w, 2 * p0 @ w, p0 @ p0 - radius**2
    reach_s = (-b - math.sqrt(b * b - 4 * a * c)) / (2 * a)
    time_s = np.arange(0.0, reach_s + 0.05, dt)
    n = time_s.size
    target = np.tile([0.4, -0.2, 0.1], (n, 1))
    columns = synth.trial_columns(time_s, target + p0 + time_s[:, None] * w, target, np.tile(w, (n, 1)), np.zeros((n, 3)))
    metadata = synth.base_metadata("oblique", target_radius_m=radius)
    metrics = trial_metrics(pd.DataFrame(columns), metadata)
    assert metrics.time_to_reach_s == pytest.approx(reach_s, rel=1e-9, abs=1e-12)
    assert metrics.distance_travelled_m == pytest.approx(speed * reach_s, rel=1e-9, abs=1e-12)
    p_reach = p0 + w * reach_s
    assert metrics.impact_normal_velocity_m_s == pytest.approx(-(w @ p_reach) / np.linalg.norm(p_reach), rel=1e-6)


def test_metric_names_carry_units_and_as_dict_is_complete(factory, synth):
    metrics = trial_metrics(factory.write("a", synth.approach()))
    values = metrics.as_dict()
    assert tuple(values) == METRIC_NAMES
    unitless = {"reached", "captured", "complete", "saturated_fraction", "min_sigma_ratio"}
    for name in METRIC_NAMES:
        if name in unitless or name.startswith("n_"):
            continue
        assert name.rsplit("_", 1)[-1] in {"s", "m", "m2", "s2", "rad", "n2"} or name.endswith("_n"), name
    for required in ("impact_velocity_m_s", "time_to_reach_s", "distance_travelled_m", "mse_position_m2",
                     "mse_velocity_m2_s2", "peak_base_torque_n_m"):
        assert required in values


def test_frame_without_metadata_is_an_analysis_error(synth):
    with pytest.raises(AnalysisError, match="metadata"):
        trial_metrics(pd.DataFrame(synth.approach()))


def test_missing_columns_and_unsorted_time_are_analysis_errors(factory, synth):
    columns = synth.approach()
    del columns["base_torque_x_n_m"]
    with pytest.raises(AnalysisError, match="base_torque_x_n_m"):
        read_trial(factory.write("nocol", columns))
    columns = synth.approach()
    columns[trial_log.TIME] = columns[trial_log.TIME][::-1].copy()
    with pytest.raises(AnalysisError, match="increasing"):
        read_trial(factory.write("unsorted", columns))
    with pytest.raises(AnalysisError, match="format_version"):
        read_trial(factory.write("future", synth.approach(), format_version=trial_log.FORMAT_VERSION + 1))


def test_time_near_the_reaction_boundary_counts_the_ticks_below_the_margin() -> None:
    """Hand-made gauge: 1 kHz, 1000 samples, 237 of them below 0.03 -> 0.237 s."""
    from analysis.metrics import REACTION_BOUNDARY_MARGIN, _time_below

    time_s = np.arange(1000) * 1e-3
    sigma = np.full(1000, 0.5)
    sigma[100:337] = REACTION_BOUNDARY_MARGIN * 0.5
    sigma[600] = REACTION_BOUNDARY_MARGIN  # at the margin: not below
    assert _time_below(time_s, sigma, REACTION_BOUNDARY_MARGIN) == pytest.approx(0.237, abs=1e-12)


def test_time_the_base_rate_bound_engaged_comes_from_the_log_record(factory, synth):
    """250 bound ticks at 1 kHz -> 0.25 s; a log without the record (older) -> 0."""
    columns = synth.approach()
    record = {"bound_rad_s": 8.7e-4, "ticks": 250, "first_s": 0.5, "last_s": 0.9}
    with_record = trial_metrics(factory.write("bounded", columns, base_rate_bound=record))
    assert with_record.base_rate_bounded_s == pytest.approx(250 * synth.DT_S, rel=1e-9)
    assert trial_metrics(factory.write("older", columns)).base_rate_bounded_s == 0.0
