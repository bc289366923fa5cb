# Protocol vocabulary shared by the firmware and the host: frame types, field names, state,
# void and fault codes. The wire format itself (framing, CRC-32, HMAC) is specified in
# docs/protocol.md and implemented in rmcfw.frames; this module only names things, once.
from micropython import const

VERSION = const(1)

# Frame types, firmware -> host. Short codes keep lines small on a 115200 baud RS-485 line.
T_BOOT = "BOOT"  # fw, wheel (definition hash), reset (last reset cause), faults (still active)
T_STATUS = "STAT"  # state, spin, rotor_ms (ms per rotor turn), rdir, lid
T_SESSION_OPEN = "SOPEN"  # chef (chef de table's id), session
T_SESSION_CLOSE = "SCLOSE"  # chef, session, spins; reason (a forced close: why, free text)
T_LAST_THREE = "LAST3"  # last (the session's coup count at its last coup), left (coups left)
# A coup is a spin with a result: a voided launch is no coup (decree 1-7 counts coups).
T_LAUNCH = "LAUNCH"  # spin, rdir (rotor direction), bdir (ball direction)
T_REV = "REV"  # spin, n (revolution count), period_us
T_RNVP = "RNVP"  # spin, drop_ms (predicted drop, firmware ms clock), lead_ms, why (fit|limit)
T_DROP = "DROP"  # spin, revs
# spin, lit (the pockets held now, ";"-joined labels in channel order, "-" none: rmcfw.frames
# .pocket_list): the ball among the pockets, from its DROP to the frame that ends the spin
T_HOP = "HOP"
T_RESULT = "RES"  # spin, num, colour, parity, half (manque/passe; "-" for green)
T_VOID = "VOID"  # spin, reason (V_* below)
T_INCIDENT = "INC"  # spin, step (start|ball_back|relaunch|ignored), state (ignored: the state)
T_FAULT = "FAULT"  # code (F_* below), on (1 raised, 0 cleared), detail
T_LID = "LID"  # locked (1/0)
T_TAMPER = "TAMP"  # what
T_RECALL = "RECALL"  # n, games ("spin:num" list, newest last)
T_CONFIG = "CFG"  # key, old, new, by (who asked): a threshold set by SET
T_ACK = "ACK"  # cmd, ok (1/0), detail: the answer to a host command

# Commands, host -> firmware.
C_STATUS = "STATUS"
C_RESEND = "RESEND"  # boot, seq: resend the journal from (boot, seq)
C_RECALL = "RECALL"  # n (>= 10 kept)
C_OPEN = "OPEN"  # chef
C_CLOSE = "CLOSE"  # chef; reason: a forced close, last three coups announced or not
C_LAST_THREE = "LAST3"
C_SET = "SET"  # key, value, by (who asks): a threshold

# Spin states (the STAT frame's `state`).
S_CLOSED = "closed"  # lid locked, no session
S_OPEN = "open"  # session open, wheel idle
S_BETS = "bets"  # place your bets (ball held by the croupier, or rotor turning)
S_TRACK = "track"  # ball on the track, bets still open
S_RNVP = "rnvp"  # "rien ne va plus" called
S_DROPPED = "dropped"  # ball left the track, bouncing among the pockets
S_RESULT = "result"  # ball at rest, result announced
S_INCIDENT = "incident"  # object in the cylinder: procedure of decree 1-4

# Void reasons.
V_SAME_DIR = "same_dir"  # ball spun the rotor's way
V_NOT_REVERSED = "not_reversed"  # rotor turned the same way as on the previous spin
V_FEW_REVS = "few_revs"  # fewer than 4 ball revolutions
V_OBJECT = "object"  # object in the cylinder
V_BALL_OUT = "ball_out"  # ball left the wheel
V_SENSORS = "sensors"  # sensors disagree
V_POWER = "power"  # the power was cut during the spin, and its end was not seen

# Incident steps (INC's `step`, decree 1-4).
INC_START = "start"  # the game stopped
INC_BACK = "ball_back"  # the ball seen back in the previous result's pocket
INC_RELAUNCH = "relaunch"  # launched again, bets staying closed
INC_IGNORED = "ignored"  # the input pressed with no ball on the track: nothing to stop

# Fault codes.
F_POCKET_STUCK_ON = "pocket_stuck_on"
F_POCKET_STUCK_OFF = "pocket_stuck_off"
F_TWO_POCKETS = "two_pockets"
F_NO_POCKET = "no_pocket"
F_ROTOR = "rotor_sensor"
F_BALL = "ball_sensor"
F_WATCHDOG = "watchdog"
F_STORAGE = "storage"
D_STATE_DAMAGED = "state file damaged"  # F_STORAGE detail: cleared when a session opens
F_EDGES = "edges_lost"  # ball/rotor edges dropped by a full IRQ buffer (detail: how many)
F_TX_OVERFLOW = "tx_overflow"  # frames a full TX queue dropped (detail: how many; in the journal)

# --- Wire details added with the frame codec (docs/protocol.md) ---

# Line starts: "$" a frame from the firmware, ">" a command from the host. A frame sent again
# from the journal (answer to RESEND) is prefixed with RESENT, outside its CRC: the bytes of
# the frame itself are exactly those first sent.
FRAME_START = "$"
COMMAND_START = ">"
RESENT = "~"

# Field names used by the wire layer itself.
K_PREV = "prev"  # BOOT: "boot:seq" of the last frame in the journal before this boot ("-" none)
K_CMD = "cmd"  # ACK: the command answered
K_CSEQ = "cseq"  # ACK: the seq of the command answered
K_OK = "ok"  # ACK: 1 done, 0 refused
K_DETAIL = "detail"  # ACK: why refused (A_* below), or what was done
K_NEXT = "next"  # ACK of a stale command: the lowest command seq now accepted
K_COUNT = "n"  # ACK of RESEND: frames sent again; TAMP: refusals since the last TAMP
K_LAST = "last"  # RESEND: last seq wanted (inclusive, optional)
K_ONLY = "only"  # RESEND: just these seqs of [seq, last], e.g. "3;7-9;12" (optional)
K_TOP = "top"  # ACK: the last seq used by the firmware in this boot

# seq 0 marks an unsequenced frame (only ACK): not journaled, never resent, not a gap.
SEQ_NONE = 0

# Why a command is refused (ACK ok=0 detail=...).
A_AUTH = "auth"  # missing or wrong HMAC tag (also logged as a TAMP frame, what=cmd_auth)
A_STALE = "stale"  # command seq not above the last accepted one: a replay, or a host restart
A_BOOT = "boot"  # addressed to another boot of the firmware: a replay from an earlier boot
A_TABLE = "table"  # addressed to another table
A_UNKNOWN = "unknown"  # no such command
A_BAD = "bad"  # missing or invalid field
A_BUSY = "busy"  # not possible in the current state (handler's answer)

# TAMP `what` values raised by the wire layer.
W_CMD_AUTH = "cmd_auth"
