"""Progress: an estimate of the share of a solve's work done (dlap.progress), at each stage of
every engine, never going back, ending at 1; a bar for ``progress=True``."""

import numpy as np
import pytest

import dlap
from dlap import generate
from dlap.progress import Progress, ProgressBar, SolveProgress, assigned_share


def _updates(solve) -> list[SolveProgress]:
    seen = []
    solve(seen.append)
    return seen


def _assert_sound(seen: list[SolveProgress], total: int) -> None:
    fractions = [u.fraction for u in seen]
    assert fractions == sorted(fractions) and 0 <= fractions[0] and fractions[-1] == 1.0, fractions
    assert seen[-1].stage == "done" and seen[-1].matched == seen[-1].total == total and seen[-1].eta == 0
    assert all(0 <= u.matched <= u.total == total and u.elapsed >= 0 for u in seen)


def test_the_share_of_an_assignment_grows_as_the_log_of_its_free_rows():
    assert assigned_share(1000, 1000) == 0 and assigned_share(0, 1000) == 1
    # JV leaving 5% of 4000 rows free is about a third of the work, not 95% of it
    assert 0.3 < assigned_share(200, 4000) < 0.4
    assert assigned_share(0, 0) == 1


def test_stages_map_into_their_parts_and_the_fraction_never_goes_back():
    seen = []
    report = Progress(seen.append, 100, interval=3600)
    report.stage("a", 0.0, 0.5)
    report(100, share=0.0)
    report(0, share=1.0)
    report.stage("b", 0.2, 1.0)  # a part that starts below where the solve is: no step back
    report(50, share=0.1)
    report.stage("c")
    report(10)
    report(5)  # same stage, within the interval: not sent
    report(0, final=True)
    assert [(u.stage, round(u.fraction, 3)) for u in seen] == [
        ("a", 0.0), ("b", 0.5), ("c", round(0.5 + 0.5 * assigned_share(10, 100), 3)), ("done", 1.0)]
    assert seen[1].matched == 50 and SolveProgress(0.25, "x", 0, 1, 2.0).eta == 6.0
    assert SolveProgress(0.0, "x", 0, 1, 2.0).eta is None


@pytest.mark.parametrize("method", ["classical", "tree", "hybrid", "auto"])
def test_a_variant_reports_its_searches(method):
    seen = _updates(lambda cb: dlap.solve(generate.uniform(300, 1.0, seed=2), method=method, device="cpu",
                                          progress=cb))
    _assert_sound(seen, 300)


DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
def test_epsilon_scaling_reports_each_phase(device):
    seen = _updates(lambda cb: dlap.solve(generate.geometric(400, seed=3), method="scaling", device=device,
                                          progress=cb))
    _assert_sound(seen, 400)
    stages = [u.stage for u in seen]
    phases = [s for s in stages if s.startswith("ε-phase")]
    assert stages[0] == "price initialisation" and stages[-2] == "exact phase"
    assert phases == [f"ε-phase {k} of {len(phases)}" for k in range(1, len(phases) + 1)] and len(phases) >= 2
    starts = [u.fraction for u in seen if u.stage.startswith("ε-phase") or u.stage == "exact phase"]
    assert np.allclose(np.diff(starts), 1 / (len(phases) + 1))  # equal parts


def test_auto_hands_over_without_going_back():
    seen = []
    result = dlap.solve(generate.geometric_int(600, seed=0), device="cpu", progress=seen.append)
    assert result.stats.method == "scaling"  # the hand-over happened
    _assert_sound(seen, 600)
    assert "exact phase" in [u.stage for u in seen]


@pytest.mark.parametrize("device", DEVICES)
def test_points_report_candidates_core_and_pricing_rounds(device):
    rng = np.random.default_rng(5)
    seen = _updates(lambda cb: dlap.solve_points(rng.random((300, 2)), rng.random((200, 2)), device=device,
                                                 progress=cb))
    _assert_sound(seen, 200)
    stages = [u.stage for u in seen]
    assert stages[:3] == ["candidates", "core solve", "pricing round 1"]


def test_progress_true_draws_a_bar_of_the_estimate(capsys):
    dlap.solve(generate.uniform(50, 1.0), progress=True)  # under a second: no bar at all
    assert capsys.readouterr().err == ""
    with ProgressBar(True, "a solve", delay=0.0) as update:
        update(SolveProgress(0.42, "ε-phase 2 of 5", 0, 10, 1.0))
    shown = capsys.readouterr().err
    assert "a solve:  42%|" in shown and "ε-phase 2 of 5" in shown
    with ProgressBar(print) as callback:  # a callback is the caller's own
        assert callback is print
