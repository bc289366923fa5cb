# The ball on the track: passes from the two sensors, direction, periods, lone edges.
from wheelsim import ball_passes

from rmcfw import ball, channels


def feed(b, events, poll_until=None):
    passes = []
    for t, ch, v in sorted(events):
        if v and b.edge(t, ch == channels.BALL_B):
            passes.append(b.t_pass)
    if poll_until is not None and b.poll(poll_until):
        passes.append(b.t_pass)
    return passes


def test_clockwise_ball_is_a_then_b():
    b = ball.Ball()
    ev = []
    ball_passes([0, 600_000, 1_250_000, 1_960_000], 1, ev)
    assert feed(b, ev) == [0, 600_000, 1_250_000, 1_960_000]
    assert b.count == 4 and b.dir == 1 and b.first_dir == 1
    assert b.period_us == 710_000
    assert b.lone == 0 and b.reversed == 0


def test_counter_clockwise_ball_is_b_then_a_and_stamped_on_a():
    b = ball.Ball()
    ev = []
    ball_passes([1_000_000, 1_650_000, 2_400_000], -1, ev)
    assert feed(b, ev) == [1_000_000, 1_650_000, 2_400_000]
    assert b.dir == -1 and b.period_us == 750_000


def test_a_missed_edge_still_counts_the_pass_on_a_clock():
    b = ball.Ball()
    ev = []
    times = [0, 600_000, 1_250_000, 1_960_000, 2_800_000]
    ball_passes(times, 1, ev, drop_a={2}, drop_b={3})
    got = feed(b, ev, poll_until=3_500_000)
    assert got == times, got  # B's lone edge is moved back by the A-B gap
    assert b.lone == 2 and b.count == 5


def test_a_ball_turning_round_is_counted():
    b = ball.Ball()
    ev = []
    ball_passes([0, 600_000], 1, ev)
    ball_passes([1_300_000, 2_000_000], -1, ev)
    feed(b, ev)
    assert b.first_dir == 1 and b.reversed == 2


def test_restart_counts_from_the_launch_pass():
    b = ball.Ball()
    ev = []
    ball_passes([0, 600_000, 1_300_000], -1, ev)
    feed(b, ev)
    b.restart()
    assert b.count == 1 and b.period_us == 0 and b.first_dir == -1
