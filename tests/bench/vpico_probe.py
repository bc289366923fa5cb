# The bench's probe on the virtual Pico (tests/bench/bench_vpico.py): the firmware's own
# Board, built and run as firmware/main.py runs it (Board.step then Board.pace, with its
# watchdog unless `nowdt` is on the flash), with timing around it and nothing changed in it.
# Compiled with mpy-cross onto the image beside the firmware; vpico_main.py calls main().
#
# What is timed, all on the chip's own clock (time.ticks_us):
# - each pass: step()'s time, and the period from one pass's start to the next's (the
#   firmware counts its own overruns in pace()); step() by the spin's state at the pass's
#   start, and the first 32 passes over 20 ms (when, which state, whether a refit ran);
# - the pin IRQs: each of the four hard handlers wrapped, the time inside it counted into a
#   preallocated array('L') (a hard IRQ must not allocate);
# - the predictor: its lap_start() (lap() for a firmware without it: the refit begun at
#   each ball pass) wrapped the same way, and the pass that ran it; its learning after a
#   result (learn_start, then learn_work's slices), and the pass that gave the result;
# - a ball pass on the track and the 3 passes after it (which build, journal and send its
#   REV frame: rmcfw.commands.Wire.owe), step() of each;
# - the heap: gc.mem_free() every 1024 passes (its low point, and the collections seen as jumps
#   up); the ~8 ms it takes counted apart from the loop's figures.
# The session ends at the chip's clock read from bench_end.txt (ms since power-up); then the
# costs of the timing itself are measured, and the figures are written to bench_out.json
# (read back from the flash image by the host), the watchdog still fed.
import gc
import json
import os
import sys
import time
from array import array

import board_pico
import machine

from rmcfw import channels, edges

tk = time.ticks_us
df = time.ticks_diff

# pass figures: passes, step sum, step max, period sum, period max, lap passes, their step
# sum, their step max, heap samples, heap min, collections seen, min right after one, last
# sample, overruns after a heap reading, periods holding one
S = array("L", [0] * 15)
HP = array("L", [0] * 6)  # periods: <=1.05 ms, <=2, <=5, <=20, <=50, more
HS = array("L", [0] * 7)  # step times: <=0.5 ms, <=0.75, <=1, <=2, <=5, <=20, more
IRQ = array("L", [0] * 12)  # per handler (ball_a, ball_b, rotor_a, rotor_b): count, sum, max
LAP = array("L", [0] * 3)  # predictor lap(): count, sum, max
LAPS = array("L", [0] * 64)  # each of the first 64 lap() times, in order
WORK = array("L", [0] * 3)  # predictor work_ended() with a refit under way: count, sum, max
# the learning after a result: learn_start() count, sum, max; learn_work() with a learning
# under way: count, sum, max; the step() of the pass that ran learn_start (max); start to
# end on the chip's clock (max, µs); the last start's tick; inside learn_start (0/1)
LEARN = array("L", [0] * 10)
PERIOD_HI = (1050, 2000, 5000, 20000, 50000)
STEP_HI = (500, 750, 1000, 2000, 5000, 20000)
HEAP_MASK = 1023  # gc.mem_free() every 1024 passes (~1 s)
# per spin state (rmcfw.proto.S_*), 4 cells each: passes, step sum, step max, steps > 1 ms
STATES = ("closed", "open", "bets", "track", "rnvp", "dropped", "result", "incident")
STATE_AT = {name: i for i, name in enumerate(STATES)}
PS = array("L", [0] * (4 * (len(STATES) + 1)))  # the last: a state not in STATES
LONG = array("L", [0] * (4 * 32))  # the first 32 steps over 20 ms: chip ms, µs, state, refit
# a ball pass on the track (a pass beginning in track or rnvp in which the ball's count
# changed) and the 3 passes after it, 4 cells each: passes, step sum, step max, steps > 1 ms
AFTER = array("L", [0] * 16)


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def _irq_wrap(isr, k):
    j = 3 * k

    def w(pin):  # hard IRQ: small ints into a preallocated array, nothing allocated
        t0 = tk()
        isr(pin)
        d = df(tk(), t0)
        IRQ[j] += 1
        IRQ[j + 1] += d
        if d > IRQ[j + 2]:
            IRQ[j + 2] = d

    return w


def _timed_irqs(b):
    """The board's four edge handlers again, each inside a timing wrapper (same trigger)."""
    Pin = machine.Pin
    names = ("ball_a", "ball_b", "rotor_a", "rotor_b")
    chans = (channels.BALL_A, channels.BALL_B, channels.ROTOR_A, channels.ROTOR_B)
    for k in range(4):
        spec = b.pins[names[k]]
        if spec.get("edge") == "both":
            trig, isr = Pin.IRQ_RISING | Pin.IRQ_FALLING, b._level_handler(chans[k])
        else:
            trig, isr = Pin.IRQ_RISING, b._pulse_handler(chans[k])
        b._irq_pins[k].irq(_irq_wrap(isr, k), trigger=trig, hard=True)


def _timed_lap(pred):
    # what a ball pass calls: lap_start() (the refit's slices in the passes after), or lap()
    name = "lap_start" if hasattr(pred, "lap_start") else "lap"
    lap = getattr(pred, name)

    def timed(t):
        t0 = tk()
        r = lap(t)
        d = df(tk(), t0)
        n = LAP[0]
        if n < 64:
            LAPS[n] = d
        LAP[0] = n + 1
        LAP[1] += d
        if d > LAP[2]:
            LAP[2] = d
        return r

    setattr(pred, name, timed)  # an instance attribute: Spin calls self.pred.lap_start(t)
    work_ended = pred.work_ended

    def timed_ended():  # the refit's later slices, as the table's track pass runs them
        if pred._work is None:
            return work_ended()
        t0 = tk()
        r = work_ended()
        d = df(tk(), t0)
        WORK[0] += 1
        WORK[1] += d
        if d > WORK[2]:
            WORK[2] = d
        return r

    pred.work_ended = timed_ended
    learn_start = pred.learn_start
    learn_work = pred.learn_work

    def timed_start():  # LEARN[0..2]; its first slice is learn_work's, timed here
        LEARN[9] = 1
        t0 = tk()
        r = learn_start()
        d = df(tk(), t0)
        LEARN[9] = 0
        LEARN[0] += 1
        LEARN[1] += d
        if d > LEARN[2]:
            LEARN[2] = d
        LEARN[8] = t0
        return r

    def timed_learn():  # LEARN[3..5], and the learning's span (LEARN[7])
        if LEARN[9] or pred.learning is None:
            return learn_work()
        t0 = tk()
        r = learn_work()
        t1 = tk()
        d = df(t1, t0)
        LEARN[3] += 1
        LEARN[4] += d
        if d > LEARN[5]:
            LEARN[5] = d
        if r and df(t1, LEARN[8]) > LEARN[7]:
            LEARN[7] = df(t1, LEARN[8])
        return r

    pred.learn_start = timed_start
    pred.learn_work = timed_learn


# --- where a pass's time goes (bench_parts.txt on the flash: `bench_vpico.py --parts`) ----
#
# Each part of Board.step() (and of Table.poll, Spin.poll) wrapped by an instance attribute
# that times it into PT by the spin's state at the pass's start: inclusive times (a part's
# own wrapped parts inside it), each wrapper's own cost measured apart (_costs). Slows the
# pass by the wrappers' cost; the parts' shares are what it is for, not the pass's total.
PARTS = (
    "edges.drain", "board.scan", "table.scan", "wire.feed", "table.poll", "ball.poll",
    "rotor.poll", "spin.poll", "spin.state_poll", "input.sample", "table.led",
    "board.tx_faults", "board.tx_flush", "wire.pending", "wire.pump", "board.tx_release",
    "wdt.feed", "spin.hop", "board.send", "uart.write", "busy", "spin.on_pass",
    "table.emit", "journal.append", "rotor.pocket_under",
)  # fmt: skip
NP = len(PARTS)
PT = array("L", [0] * (2 * NP * (len(STATES) + 1)))  # per state and part: calls, µs
CUR = array("L", [len(STATES)])  # the state of the pass under way (an index into STATES)


def _part(obj, name, k, fn=None, arity=0):
    """obj.name (or fn), called with `arity` arguments, timed as part k; set as obj.name (an
    instance attribute). A wrapper of fixed arity: `*a` would allocate a tuple a call."""
    f = fn if fn is not None else getattr(obj, name)

    def add(t0):
        j = 2 * (CUR[0] * NP + k)
        PT[j] += 1
        PT[j + 1] += df(tk(), t0)

    def timed0():
        t0 = tk()
        r = f()
        add(t0)
        return r

    def timed1(x):
        t0 = tk()
        r = f(x)
        add(t0)
        return r

    def timed2(x, y):
        t0 = tk()
        r = f(x, y)
        add(t0)
        return r

    timed = (timed0, timed1, timed2)[arity]
    if obj is not None:
        setattr(obj, name, timed)
    return timed


def _journal_part(jr, k):
    """Journal.append (a line, and its type or not) timed as part k."""
    f = jr.append

    def timed(line, kind=None):
        t0 = tk()
        f(line, kind) if kind is not None else f(line)
        j = 2 * (CUR[0] * NP + k)
        PT[j] += 1
        PT[j + 1] += df(tk(), t0)

    jr.append = timed


class _Proxy:
    """A native object (the UART, the WDT) whose methods the board calls, some timed."""

    def __init__(self, obj, timed):
        self._o = obj
        for name in ("any", "read", "txdone", "write", "feed"):
            if hasattr(obj, name):
                setattr(self, name, getattr(obj, name))
        for name, k, arity in timed:
            _part(self, name, k, None, arity)


def _busy():
    """A fixed piece of work, no call, no allocation: slower in a state only when the
    interrupts take more of the chip's time there."""
    x = 0
    for i in range(50):
        x += i
    return x


def _timed_parts(b):
    from rmcfw import spin as spin_mod

    idx = {n: i for i, n in enumerate(PARTS)}
    tb = b.table
    sp = tb.spin
    _part(b.edges, "drain", idx["edges.drain"], None, 1)
    _part(b, "scan", idx["board.scan"], None, 1)
    _part(tb, "scan", idx["table.scan"], None, 2)
    _part(b.wire, "feed", idx["wire.feed"], None, 1)
    _part(tb, "poll", idx["table.poll"], None, 1)
    _part(tb.ball, "poll", idx["ball.poll"], None, 1)
    _part(tb.rotor, "poll", idx["rotor.poll"], None, 1)
    _part(sp, "poll", idx["spin.poll"], None, 1)
    polls = spin_mod._POLLS
    for s in list(polls):
        polls[s] = _part(None, None, idx["spin.state_poll"], polls[s], 2)
    for inp in b._inputs:
        _part(inp, "sample", idx["input.sample"], None, 1)
    _part(tb, "led", idx["table.led"])
    _part(b, "_tx_faults", idx["board.tx_faults"])
    _part(b, "_tx_flush", idx["board.tx_flush"], None, 1)
    _part(b, "_tx_release", idx["board.tx_release"], None, 1)
    _part(b.wire, "pending", idx["wire.pending"])
    _part(b.wire, "pump", idx["wire.pump"])
    _part(sp, "_hop", idx["spin.hop"], None, 2)
    b.uart = _Proxy(b.uart, (("write", idx["uart.write"], 1),))
    if b.wdt is not None:
        b.wdt = _Proxy(b.wdt, (("feed", idx["wdt.feed"], 0),))
    b.wire.write = _part(None, None, idx["board.send"], b.wire.write, 1)
    _part(sp, "on_pass", idx["spin.on_pass"], None, 1)
    _part(tb, "emit", idx["table.emit"], None, 2)  # the table's frames (not the ACKs)
    _journal_part(b.journal, idx["journal.append"])
    _part(tb.rotor, "pocket_under", idx["rotor.pocket_under"], None, 1)
    return _part(None, None, idx["busy"], _busy)


def _loop(step, pace, spin, stop_ms, limit, board=None, S=S, HP=HP, HS=HS, LAP=LAP, PS=PS):
    """Board.run's loop (step, then pace) with the pass figures; until the chip's clock
    reaches stop_ms or `limit` passes. gc.mem_free() takes ~8 ms here (it walks the heap's
    table): read every HEAP_EVERY passes, and the overrun and the period it makes are
    counted apart (S[13], S[14]), not as the firmware's."""
    mem_free = gc.mem_free
    ticks_ms = time.ticks_ms
    seen = LAP[0]
    learns = LEARN[0]
    last = tk()
    n = 0
    probed = False
    at = STATE_AT.get
    other = len(STATES)
    n_long = 0
    ball = spin.ball if board is not None else None
    count = 0
    after = 4  # passes since the last ball pass on the track (4: none to time)
    while n < limit:
        k = at(spin.state, other) * 4  # the state the pass starts in
        CUR[0] = k // 4
        t0 = tk()
        step()
        d = df(tk(), t0)
        PS[k] += 1
        PS[k + 1] += d
        if d > PS[k + 2]:
            PS[k + 2] = d
        if d > 1000:
            PS[k + 3] += 1
            if d > 20000 and n_long < 32:
                j = 4 * n_long
                LONG[j] = ticks_ms()
                LONG[j + 1] = d
                LONG[j + 2] = k // 4
                LONG[j + 3] = 1 if LAP[0] != seen else 0
                n_long += 1
        if ball is not None and (after < 4 or ball.count != count):
            after = _after(ball, count, after, k // 4, d)
            count = ball.count
        p = df(t0, last)
        last = t0
        n += 1
        S[1] += d
        if d > S[2]:
            S[2] = d
        if probed:  # the period that held the heap reading: not the firmware's
            probed = False
            S[14] += 1
        else:
            S[3] += p
            if p > S[4]:
                S[4] = p
            if p <= 1050:
                HP[0] += 1
            else:
                i = 1
                while i < 5 and p > PERIOD_HI[i]:
                    i += 1
                HP[i] += 1
        if d <= 500:
            HS[0] += 1
        else:
            i = 1
            while i < 6 and d > STEP_HI[i]:
                i += 1
            HS[i] += 1
        if LEARN[0] != learns:  # this pass gave a result and started the learning
            learns = LEARN[0]
            if d > LEARN[6]:
                LEARN[6] = d
        if LAP[0] != seen:  # this pass ran the predictor's refit: a ball pass
            seen = LAP[0]
            S[5] += 1
            S[6] += d
            if d > S[7]:
                S[7] = d
        if not n & HEAP_MASK:
            f = mem_free()
            S[8] += 1
            if S[8] == 1 or f < S[9]:
                S[9] = f
            if S[8] > 1 and f > S[12] + 1024:  # a collection since the last sample
                S[10] += 1
                if S[10] == 1 or f < S[11]:
                    S[11] = f
            S[12] = f
            if df(ticks_ms(), stop_ms) >= 0:
                break
            probed = True
            if board is not None:
                o = board.overruns
                pace()
                S[13] += board.overruns - o  # the overrun the reading made
                continue
        pace()
    S[0] += n
    return n


def _after(ball, count, after, state, d):
    """A ball pass on the track and the 3 passes after it: AFTER's figures; the next pass's
    place after the last ball pass (4: none timed)."""
    if ball.count != count and (state == 3 or state == 4):  # track, rnvp
        after = 0
    if after < 4:
        j = 4 * after
        AFTER[j] += 1
        AFTER[j + 1] += d
        if d > AFTER[j + 2]:
            AFTER[j + 2] = d
        if d > 1000:
            AFTER[j + 3] += 1
        after += 1
    return after


def _with_busy(step, busy):
    """step(), then, every 16th pass, the fixed busy work (timed as a part)."""
    n = array("L", [0])

    def stepped():
        step()
        n[0] += 1
        if not n[0] & 15:
            busy()

    return stepped


CAUGHT = []  # catch mode: where a pass in the state watched allocated (tracebacks)


def _catching(step, spin, state, every=97, most=12):
    """bench_catch.txt names a state: every `every`-th pass in it runs under heap_lock, and
    the first allocation it makes raises MemoryError there, its traceback kept (the pass is
    cut short: a diagnosis run, its other figures not the firmware's). Not seen so: a
    function's frame that MicroPython takes from the heap (over 11 words) falls back to the
    C stack under the lock (tests/test_fw_frames.py finds those)."""
    import io

    import micropython

    seen = array("L", [0])

    def catching():
        if spin.state != state or len(CAUGHT) >= most:
            return step()
        seen[0] += 1
        if seen[0] % every:
            return step()
        locked = True
        micropython.heap_lock()
        try:
            step()
        except MemoryError as e:
            micropython.heap_unlock()  # (once: the lock is a depth count)
            locked = False
            s = io.StringIO()
            sys.print_exception(e, s)
            CAUGHT.append(s.getvalue())
        finally:
            if locked:
                micropython.heap_unlock()

    return catching


def _costs(b):
    """What the timing itself costs, measured after the session (the watchdog fed)."""
    out = {}
    b._feed()
    # a pass's timing, with a step and pace that do nothing, against a bare loop of the two
    for i in range(len(S)):
        S[i] = 0
    n = 1000

    def nothing():
        pass

    class Idle:
        state = "open"

    t0 = tk()
    for _ in range(n):
        nothing()
        nothing()
    bare = df(tk(), t0)
    t0 = tk()
    _loop(nothing, nothing, Idle(), time.ticks_add(time.ticks_ms(), 100000), n)
    out["loop_timing_us"] = (df(tk(), t0) - bare) / n
    b._feed()
    t0 = tk()
    for _ in range(20):
        gc.mem_free()
    out["mem_free_us"] = df(tk(), t0) / 20
    # a part's wrapper (bench_parts.txt): its own time, over a function doing nothing
    w = _part(None, None, 0, nothing)  # (after the figures were copied: its cell unread)
    t0 = tk()
    for _ in range(n):
        w()
    wrapped = df(tk(), t0)
    t0 = tk()
    for _ in range(n):
        nothing()
    out["part_wrapper_us"] = (wrapped - df(tk(), t0)) / n
    b._feed()
    # A hard IRQ's entry and exit, which the wrappers do not see: rp2040js raises no GPIO
    # interrupt for a pin the core drives, so a hard Timer callback stands in (the port's
    # same mp_irq path; the alarm's own handling differs): a busy loop's time with a 2 kHz
    # hard callback as the board's handler (an Edges push) and without, per callback
    e = edges.Edges(256)
    push = e.push
    hits = array("L", [0])

    def isr(t):
        push(tk(), 0, 1)
        hits[0] += 1
        if e.pending() > 200:
            e._i[1] = e._i[0]  # (emptied here: the ring's cost stays a push's)

    def busy():
        t0 = tk()
        x = 0
        for i in range(3000):
            x += i
        return df(tk(), t0)

    plain = busy()
    b._feed()
    tim = machine.Timer(mode=machine.Timer.PERIODIC, freq=2000, callback=isr, hard=True)
    hits[0] = 0
    with_irq = busy()
    n = hits[0]
    tim.deinit()
    b._feed()
    out["timer_irqs"] = n
    if n:
        out["irq_dispatch_us"] = (with_irq - plain) / n  # entry, handler, exit
    out["busy_us"] = [plain, with_irq]
    b._feed()
    return out


def _figures(b, boot_free, import_free, board_free, passes, t_start, t_end):
    s = S
    fig = {
        "heap_boot": boot_free,
        "heap_import": import_free,
        "heap_board": board_free,
        "heap_min": s[9],
        "heap_samples": s[8],
        "collections_seen": s[10],
        "heap_min_after_collection": s[11],
        "passes": passes,
        "session_us": df(t_end, t_start),
        "step_sum_us": s[1],
        "step_max_us": s[2],
        "period_sum_us": s[3],
        "period_max_us": s[4],
        "period_hist": list(HP),
        "step_hist": list(HS),
        "lap_passes": s[5],
        "lap_pass_step_sum_us": s[6],
        "lap_pass_step_max_us": s[7],
        "overruns": b.overruns,
        "overruns_heap_reading": s[13],
        "periods_heap_reading": s[14],
        "period_target_us": b.period_us,
        "irq": list(IRQ),
        "states": list(STATES) + ["other"],  # noqa: RUF005 (MicroPython)
        "per_state": list(PS),
        "long_steps": [list(LONG[i : i + 4]) for i in range(0, 128, 4) if LONG[i + 1]],
        "lap": list(LAP),
        "work": list(WORK),
        "learn": list(LEARN[:8]),
        "laps_us": list(LAPS[: min(LAP[0], 64)]),
        "after_pass": list(AFTER),
        "watchdog": b.wdt is not None,
        "reset": b.reset,
    }
    gc.collect()
    fig["heap_after_session"] = gc.mem_free()
    return fig


def _write(doc):
    with open("bench_out.json", "w") as f:
        json.dump(doc, f)


def main(boot_free, import_free):
    with open("bench_end.txt") as f:
        stop_ms = int(f.read())
    b = board_pico.Board(watchdog=not _exists("nowdt"))
    gc.collect()
    board_free = gc.mem_free()
    _timed_irqs(b)
    _timed_lap(b.table.pred)
    parts = _exists("bench_parts.txt")
    busy = _timed_parts(b) if parts else None
    step = b.step
    if _exists("bench_catch.txt"):
        with open("bench_catch.txt") as f:
            step = _catching(step, b.table.spin, f.read().strip())
    if busy is not None:
        step = _with_busy(step, busy)
    try:
        t_start = tk()
        b._due = t_start
        passes = _loop(step, b.pace, b.table.spin, stop_ms, 0x3FFFFFFF, b)
        t_end = tk()
        doc = _figures(b, boot_free, import_free, board_free, passes, t_start, t_end)
        if parts:
            doc["parts"] = list(PARTS)
            doc["part_times"] = list(PT)
        if CAUGHT:
            doc["caught"] = CAUGHT
        b._feed()
        doc["costs"] = _costs(b)
    except Exception as e:  # the figures say why, rather than a reset the host cannot read
        sys.print_exception(e)
        doc = {"error": type(e).__name__ + ": " + str(e)}
    b._feed()
    _write(doc)
    print("bench_vpico:", doc)
    while True:  # the table stopped; the watchdog (if any) fed until the host is done
        b._feed()
        time.sleep_ms(50)
