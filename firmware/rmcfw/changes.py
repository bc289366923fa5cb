# The changes to the state that must survive a power cut, one function each.
#
# rmcfw.spin makes them live, as their frames go out; rmcfw.recover makes them again at
# power-up, from the frames journaled after the last save (a cut between a frame and its
# save). Both call these, so the two can never drift apart. Each takes the state dict
# (rmcfw.store.defaults()) and what its frame says, and changes nothing when the state holds
# the change already: a frame applied twice, or one that is not about the spin under way.
from rmcfw import proto, store


def launch_void(rdir, bdir, last, rotor_bad):
    """A launch's own void reason, or None: rotor_bad (its sensors: stopped, or too many
    errors), the rotor not reversed since the last launch (last: its direction then), the
    ball spun the rotor's way (bdir 0: not seen yet, checked at a later pass)."""
    if rotor_bad:
        return proto.V_SENSORS
    if rdir == last:
        return proto.V_NOT_REVERSED
    if bdir and bdir == rdir:
        return proto.V_SAME_DIR
    return None


def launch(st, n, rdir, why):
    """Spin n launched, the rotor turning rdir (+1, -1, 0); why: its void (None: none), owed
    until its VOID is sent (void() clears it). False when n is not a new spin."""
    if n <= st["spin"]:
        return False
    st["spin"] = n
    st["rdir"] = rdir
    st["run"] = n  # a spin under way: resumed after a power cut (Spin.resume)
    st["voided"] = None
    st["run_void"] = why
    st["run_revs"] = 0
    st["run_lone"] = [0, 0]
    st["frozen"] = False  # an incident's relaunch: launched
    return True


def lap(st, n, revs):
    """Spin n's laps so far (REV): a spin resumed after a cut counts on from them."""
    if st["run"] == n:
        st["run_revs"] = revs


def disagree(st, n, lone, reversed_):
    """Spin n's ball sensors' disagreements so far (REV): their lone edges and reversed
    passes. A spin resumed after a cut counts on from them."""
    if st["run"] == n:
        st["run_lone"] = [lone, reversed_]


def drop(st, n, why):
    """Spin n's ball dropped; why: the drop's void (few laps, ball sensors), owed until its
    VOID is sent. None, or a spin voided already: nothing owed."""
    if why and st["run"] == n and not st["voided"]:
        st["run_void"] = why


def void(st, n, reason):
    """Spin n voided (VOID sent): settled, but its ball may still run. After a cut it is
    resumed to the ball's rest, its passes not taken for a launch."""
    if st["run"] == n:
        st["voided"] = reason
        st["run_void"] = None


def result(st, n, label):
    """Spin n's result: kept among the last RESULTS_KEPT, the spin over, counted in the
    session (and in its last three). False when the state holds it already."""
    res = st["results"]
    if res and res[-1][0] >= n:
        return False
    res.append([n, label])
    if len(res) > store.RESULTS_KEPT:
        res.pop(0)
    if st["run"] == n:
        st["run"] = None
        st["voided"] = None
        st["run_void"] = None
    sess = st["session"]
    if sess:
        sess["spins"] += 1
        if sess.get("last3"):
            sess["left"] -= 1
    return True


def incident(st, n):
    """An incident (decree 1-4) stopped spin n: it awaits the ball back, then the relaunch,
    a spin of its own."""
    st["incident"] = n
    if st["run"] == n:
        st["run"] = None


def relaunch(st):
    """The incident's ball is back: its relaunch, bets closed, is the next launch."""
    st["incident"] = None
    st["frozen"] = True


def session_open(st, n, chef):
    """Session n opened by chef. False when it is not a new session."""
    if n <= st["sessions"]:
        return False
    st["sessions"] = n
    st["session"] = {"id": n, "chef": chef, "spins": 0, "last3": 0, "left": 0}
    return True


def session_close(st, n):
    """Session n closed: an incident still open ends with it."""
    sess = st["session"]
    if sess and sess["id"] == n:
        st["session"] = None
        st["incident"] = None


def last_three(st, last, left):
    """The last three coups announced: the session ends with its coup `last`, `left` to go."""
    sess = st["session"]
    if sess:
        sess["last3"] = last
        sess["left"] = left


def fault(st, code, on, detail=""):
    """A fault present (on: with its detail) or cleared."""
    if on:
        st["faults"][code] = detail
    else:
        st["faults"].pop(code, None)


def seen(st, n):
    """A frame of spin n: the spin counter goes on from the newest (with the launches trimmed
    from the journal, a lost state file still never reuses a number)."""
    if n > st["spin"]:
        st["spin"] = n
